// Tool definitions of the OpenAI Responses dialect (docs/SERVER.md §5.4, §5.6; the tools block:
// docs/TOKENIZER.md "Tools block"): the `tools` array (and the `tools` a tool_search_output item
// loads) → one prompt schema per tool, with `namespace` groups flattened to "<namespace><name>" and
// the hosted `tool_search` tool given a function schema; plus the reverse map that restores the
// wire name, namespace and item type on the calls the model makes. Must not: parse input items or
// build response objects (openai_responses.cpp does).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/api_request.h"

namespace flashkv {

struct ResponsesTools {
  std::vector<Json> schemas;        // normalized, for the prompt's tools block
  std::vector<ToolWireName> names;  // one per flattened or hosted tool
};

// Appends the tools of `tools` (a JSON array; `where` names it in errors) to `out`.
Status ParseResponsesTools(const Json& tools, std::string_view where, ResponsesTools* out);

// The entry whose prompt name is `prompt_name`, or nullptr for plain function tools.
const ToolWireName* FindToolWireName(const std::vector<ToolWireName>& names,
                                     std::string_view prompt_name);

}  // namespace flashkv
