#include "chat/dsml.h"

#include "util/json_depth.h"
#include "util/xml_escape.h"

namespace flashkv {
namespace {

constexpr std::string_view kParamClose = "</｜DSML｜parameter>";

std::string Dump(const nlohmann::ordered_json& v) {
  return v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Replaces every occurrence of `needle` by `replacement` + needle without its first byte.
std::string EscapeLeading(std::string_view text, std::string_view needle,
                          std::string_view replacement) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t hit = text.find(needle, i);
    if (hit == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, hit - i));
    out.append(replacement);
    i = hit + 1;  // the '<' is replaced, the rest of the tag is copied on
  }
  return out;
}

void AppendParameter(std::string_view key, const nlohmann::ordered_json& value, std::string* out) {
  *out += "<｜DSML｜parameter name=\"";
  *out += EscapeDsmlAttribute(key);
  *out += value.is_string() ? "\" string=\"true\">" : "\" string=\"false\">";
  if (value.is_string()) {
    *out += EscapeLeading(value.get_ref<const std::string&>(), kParamClose, "&lt;");
  } else {
    *out += EscapeLeading(Dump(value), kParamClose, "\\u003c");
  }
  *out += "</｜DSML｜parameter>\n";
}

}  // namespace

std::string RenderDsmlToolCalls(const std::vector<ToolCall>& calls) {
  if (calls.empty()) return "";
  std::string out = "\n\n<｜DSML｜tool_calls>\n";
  for (const ToolCall& call : calls) {
    out += "<｜DSML｜invoke name=\"";
    out += EscapeDsmlAttribute(call.name);
    out += "\">\n";
    // Too deep to dump back safely: rendered as the raw text it is. The server refuses such
    // arguments with a 400 first; this keeps the renderer safe for every caller.
    nlohmann::ordered_json args;
    if (JsonDepthWithin(call.arguments)) {
      args = nlohmann::ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    }
    if (args.is_object()) {
      for (const auto& [key, value] : args.items()) AppendParameter(key, value, &out);
    } else {
      out += "<｜DSML｜parameter name=\"arguments\" string=\"true\">";
      out += EscapeLeading(call.arguments, kParamClose, "&lt;");
      out += "</｜DSML｜parameter>\n";
    }
    out += "</｜DSML｜invoke>\n";
  }
  out += "</｜DSML｜tool_calls>";
  return out;
}

std::string EscapeToolResult(std::string_view text) {
  return EscapeLeading(text, "</tool_result>", "&lt;");
}

std::string EscapeDsmlAttribute(std::string_view text) {
  return EscapeXml(text);
}

std::string DecodeXmlEntities(std::string_view text) {
  static constexpr std::pair<std::string_view, char> kEntities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '&') {
      bool replaced = false;
      for (const auto& [entity, ch] : kEntities) {
        if (text.substr(i, entity.size()) == entity) {
          out.push_back(ch);
          i += entity.size();
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
    }
    out.push_back(text[i++]);
  }
  return out;
}

nlohmann::ordered_json DsmlParameterValue(std::string_view body, bool is_string) {
  if (is_string) return DecodeXmlEntities(body);
  // Generated text nested beyond the bound stays text, like any body that is not JSON.
  if (!JsonDepthWithin(body)) return std::string(body);
  nlohmann::ordered_json v = nlohmann::ordered_json::parse(body, nullptr, false);
  if (v.is_discarded()) return std::string(body);
  return v;
}

}  // namespace flashkv
