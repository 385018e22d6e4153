// DSML, DeepSeek V4's tool-call markup: the canonical rendering of tool calls and tool
// results into prompt text (docs/TOKENIZER.md "DSML tool calls"), and the value conversions the
// output parser shares (entity decoding, parameter value → JSON). Must not: track streaming state
// (output_parser.h does) or know the rest of the prompt (prompt_renderer.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_message.h"

namespace flashkv {

// The tag-name prefixes the model may use, in the parser's order of preference (docs/TOKENIZER.md
// "Output parsing"): the real one, the "short" drift with the first bar missing, and plain XML.
inline constexpr std::string_view kDsmlPrefixes[] = {"｜DSML｜", "DSML｜", ""};

// "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"…\">\n<｜DSML｜parameter …>…\n…
// </｜DSML｜tool_calls>" for the calls, or "" when there are none. Arguments in the
// client's key order; string="true" iff the JSON value is a string; non-object arguments
// (and arguments nested deeper than kMaxJsonDepth) become one string parameter named
// "arguments" holding the raw text.
std::string RenderDsmlToolCalls(const std::vector<ToolCall>& calls);

// Tool output inside <tool_result>…</tool_result>: only a literal "</tool_result>" is
// escaped (as "&lt;/tool_result>"); '<', '>', '&' stay literal (file and shell output).
std::string EscapeToolResult(std::string_view text);

// Attribute values: & < > " as entities.
std::string EscapeDsmlAttribute(std::string_view text);

// &amp; &lt; &gt; &quot; &apos; → characters; anything else is left as written.
std::string DecodeXmlEntities(std::string_view text);

// A parameter body as a JSON value: strings (string="true", or no attribute) are
// entity-decoded JSON strings; string="false" bodies are parsed as JSON and re-emitted
// minified. A string="false" body that is not valid JSON, or nests deeper than
// kMaxJsonDepth, becomes a JSON string of the raw text (so the arguments object stays valid
// and dumping it never recurses without a bound; see docs/TOKENIZER.md).
nlohmann::ordered_json DsmlParameterValue(std::string_view body, bool is_string);

}  // namespace flashkv
