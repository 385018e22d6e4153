#include "chat/tool_schema.h"

#include <cstdio>

namespace flashkv {
namespace {

// DeepSeek V4's TOOLS_TEMPLATE (encoding/encoding_dsv4.py in the HF model repo) with the
// DSML and thinking tokens substituted; {schemas} goes between the two halves. This is
// prompt data the model was trained on, so it is reproduced byte for byte.
constexpr const char* kToolsHead =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke "
    "tools by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" "
    "string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other "
    "types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete "
    "reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr const char* kToolsTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
    "tool calls.\n";

void AppendPythonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void AppendPython(const nlohmann::ordered_json& v, std::string* out) {
  if (v.is_object()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      if (!first) *out += ", ";
      first = false;
      AppendPythonString(key, out);
      *out += ": ";
      AppendPython(value, out);
    }
    out->push_back('}');
  } else if (v.is_array()) {
    out->push_back('[');
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) *out += ", ";
      AppendPython(v[i], out);
    }
    out->push_back(']');
  } else if (v.is_string()) {
    AppendPythonString(v.get<std::string>(), out);
  } else {
    // Numbers, booleans, null: JSON spelling (Python's differs only for floats whose
    // shortest form crosses its exponent threshold, which schemas do not contain).
    *out += v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
}

}  // namespace

nlohmann::ordered_json NormalizeToolSchema(const nlohmann::ordered_json& tool) {
  if (!tool.is_object()) return tool;
  auto type = tool.find("type");
  bool is_function = type != tool.end() && type->is_string() && *type == "function";
  if (is_function) {
    auto fn = tool.find("function");
    if (fn != tool.end() && fn->is_object()) return *fn;
    if (tool.contains("name")) {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      for (const char* key : {"name", "description", "parameters"}) {
        if (tool.contains(key)) out[key] = tool[key];
      }
      return out;
    }
  }
  return tool;
}

std::string DumpJsonPythonStyle(const nlohmann::ordered_json& value) {
  std::string out;
  AppendPython(value, &out);
  return out;
}

std::string RenderToolsBlock(const std::vector<nlohmann::ordered_json>& tools) {
  if (tools.empty()) return "";
  std::string out = kToolsHead;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (i) out.push_back('\n');
    out += DumpJsonPythonStyle(tools[i]);
  }
  out += kToolsTail;
  return out;
}

}  // namespace flashkv
