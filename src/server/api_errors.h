// Error responses in each API's own JSON shape (docs/SERVER.md §5.9): OpenAI and Responses
// {"error":{"message","type","param","code"}}, Anthropic {"type":"error","error":{"type",
// "message"}}, and the HTTP status for an engine Status. Must not: decide what is an error.
#pragma once

#include <string>

#include "server/api_request.h"
#include "server/json_util.h"
#include "util/status.h"

namespace flashkv {

// The dialect an endpoint speaks, so transport errors (401, 404, 413) use its shape.
Dialect DialectForPath(const std::string& path);

// status → error type: OpenAI invalid_request_error / authentication_error /
// not_found_error / server_error ...; Anthropic invalid_request_error /
// authentication_error / not_found_error / request_too_large / api_error /
// overloaded_error.
std::string ErrorType(Dialect dialect, int status);

Json ErrorJson(Dialect dialect, int status, const std::string& message);

// InvalidArgument, OutOfRange, Unsupported, ResourceExhausted → 400; NotFound → 404;
// FailedPrecondition → 409; Cancelled → 499 (client closed; never seen by it); else 500.
int HttpStatusFor(const Status& status);

}  // namespace flashkv
