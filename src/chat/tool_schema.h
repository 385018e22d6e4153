// Tool schemas for the prompt's "## Tools" block: normalising the dialects' tool objects to
// the one-object-per-tool form DeepSeek's encoder renders, and the block's text. Must not:
// parse HTTP requests (server/ hands in the `tools` array elements).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashkv {

// OpenAI {"type":"function","function":{…}} → the inner object; Responses flat functions
// {"type":"function","name",…} → {name, description, parameters}; anything else (Anthropic
// {name, description, input_schema}) as sent.
nlohmann::ordered_json NormalizeToolSchema(const nlohmann::ordered_json& tool);

// JSON text as Python's json.dumps(value, ensure_ascii=False) writes it (", " and ": "
// separators, non-ASCII kept), which is how DeepSeek's official encoder prints schemas.
std::string DumpJsonPythonStyle(const nlohmann::ordered_json& value);

// The "## Tools" block: DeepSeek V4's official tools template (encoding_dsv4.py) with one
// schema per line; ends with "\n". Empty when `tools` is empty.
std::string RenderToolsBlock(const std::vector<nlohmann::ordered_json>& tools);

}  // namespace flashkv
