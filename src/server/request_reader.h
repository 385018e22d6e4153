// ReadApiRequest: a request body's text to a checked ApiRequest of one dialect — JSON
// parsing with the nesting limit, the dialect's parser, then the dialect's schema
// (request_schema.h). The one entry point every generation endpoint reads bodies through,
// so nothing a client sends reaches rendering unchecked. Must not: render, tokenize or
// know HTTP.
#pragma once

#include <string_view>

#include "server/api_request.h"
#include "util/status.h"
#include "util/work_budget.h"

namespace flashkv {

// InvalidArgument / Unsupported (→ 400) naming the field at fault; with a `budget`, the
// parse steps it (json_builder.h) and a spent budget is its status.
Expected<ApiRequest> ReadApiRequest(Dialect dialect, std::string_view body,
                                    WorkBudget* budget = nullptr);

}  // namespace flashkv
