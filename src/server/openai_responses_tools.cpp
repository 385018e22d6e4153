#include "server/openai_responses_tools.h"

#include "chat/tool_schema.h"

namespace flashkv {
namespace {

Json EmptyObjectSchema() {
  return Json{{"type", "object"}, {"properties", Json::object()}};
}

// {name, description, parameters} with the defaults the prompt needs when a field is absent.
Json FunctionSchema(const std::string& name, const Json& tool,
                    std::string_view default_description) {
  Json out = Json::object();
  out["name"] = name;
  auto d = tool.find("description");
  out["description"] = d != tool.end() && d->is_string() ? *d : Json(default_description);
  auto p = tool.find("parameters");
  if (p == tool.end()) p = tool.find("input_schema");
  out["parameters"] = p != tool.end() && !p->is_null() ? *p : EmptyObjectSchema();
  return out;
}

Status ParseNamespace(const Json& group, const std::string& where, ResponsesTools* out) {
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> ns, OptString(group, "name"));
  if (!ns || ns->empty()) return InvalidArgument("'{}.name' is required for a namespace", where);
  auto tools = group.find("tools");
  if (tools == group.end() || !tools->is_array())
    return InvalidArgument("'{}.tools' must be an array of function tools", where);
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string at = where + ".tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return InvalidArgument("'{}' must be an object", at);
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> type, OptString(t, "type"));
    if (type && *type != "function")
      return InvalidArgument("'{}.type' \"{}\" is not supported in a namespace", at, *type);
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> name, OptString(t, "name"));
    if (!name || name->empty()) return InvalidArgument("'{}.name' is required", at);
    // The model sees one flat name; the client gets name and namespace back apart.
    const std::string flat = *ns + *name;
    out->schemas.push_back(FunctionSchema(flat, t, ""));
    out->names.push_back(ToolWireName{flat, *name, *ns, false});
  }
  return Status::Ok();
}

}  // namespace

Status ParseResponsesTools(const Json& tools, std::string_view where, ResponsesTools* out) {
  if (tools.is_null()) return Status::Ok();
  if (!tools.is_array())
    return InvalidArgument("'{}' must be an array, not {}", where, JsonTypeName(tools));
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string at = std::string(where) + "[" + std::to_string(i) + "]";
    if (!t.is_object())
      return InvalidArgument("'{}' must be an object, not {}", at, JsonTypeName(t));
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> type, OptString(t, "type"));
    if (type == "namespace") {
      FLASHKV_RETURN_IF_ERROR(ParseNamespace(t, at, out));
    } else if (type == "tool_search") {
      out->schemas.push_back(FunctionSchema("tool_search", t, "Search available tools."));
      out->names.push_back(ToolWireName{"tool_search", "tool_search", "", true});
    } else {
      out->schemas.push_back(NormalizeToolSchema(t));
    }
  }
  return Status::Ok();
}

const ToolWireName* FindToolWireName(const std::vector<ToolWireName>& names,
                                     std::string_view prompt_name) {
  for (const ToolWireName& n : names) {
    if (n.prompt_name == prompt_name) return &n;
  }
  return nullptr;
}

}  // namespace flashkv
