// The Anthropic Messages schema (POST /v1/messages and /v1/messages/count_tokens).
#include <cctype>

#include "server/request_schema.h"
#include "server/schema_checks.h"

namespace flashkv {
namespace {

using namespace schema;  // NOLINT: the check vocabulary of this file

// Server tools carry a versioned type ("web_search_20250305", "bash_20250124").
bool IsVersionedToolType(const std::string& type) {
  const size_t underscore = type.rfind('_');
  if (underscore == std::string::npos || underscore == 0 || type.size() - underscore != 9) {
    return false;
  }
  for (size_t i = underscore + 1; i < type.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(type[i]))) return false;
  }
  return true;
}

// The model reads text only: an answer given without the image or document it was asked
// about would look like an answer about it, so these blocks are refused by name.
Status NotText(const std::string& at, const std::string& type) {
  return Unsupported("'{}' is an \"{}\" block: this server reads text blocks only", at, type);
}

// Blocks inside a tool_result's content: text only.
Status ResultBlocksSchema(const Json& content, const std::string& at) {
  if (!content.is_array()) return Status::Ok();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bat = Item(at, i);
    FLASHKV_RETURN_IF_ERROR(ExpectKind(content[i], bat, kObject));
    FLASHKV_RETURN_IF_ERROR(Required(content[i], bat, "type", kString));
    if (content[i]["type"] != "text") return NotText(bat, content[i]["type"].get<std::string>());
    FLASHKV_RETURN_IF_ERROR(Required(content[i], bat, "text", kString));
  }
  return Status::Ok();
}

Status BlockSchema(const Json& b, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(ExpectKind(b, at, kObject));
  FLASHKV_RETURN_IF_ERROR(Required(b, at, "type", kString));
  FLASHKV_RETURN_IF_ERROR(Optional(b, at, "cache_control", kObject | kNull));
  const std::string& type = b["type"].get_ref<const std::string&>();
  if (type == "text") return Required(b, at, "text", kString);
  if (type == "thinking") {
    FLASHKV_RETURN_IF_ERROR(Required(b, at, "thinking", kString));
    return Optional(b, at, "signature", kString | kNull);
  }
  if (type == "redacted_thinking") return Required(b, at, "data", kString);
  if (type == "tool_use") {
    FLASHKV_RETURN_IF_ERROR(Required(b, at, "id", kString));
    FLASHKV_RETURN_IF_ERROR(NonEmptyString(b, at, "name"));
    return Optional(b, at, "input", kObject | kNull);
  }
  if (type == "tool_result") {
    FLASHKV_RETURN_IF_ERROR(Required(b, at, "tool_use_id", kString));
    FLASHKV_RETURN_IF_ERROR(Optional(b, at, "is_error", kBoolean | kNull));
    FLASHKV_RETURN_IF_ERROR(Optional(b, at, "content", kString | kArray | kNull));
    if (const Json* c = Find(b, "content")) return ResultBlocksSchema(*c, Field(at, "content"));
    return Status::Ok();
  }
  if (type == "image" || type == "document" || type == "search_result" ||
      type == "container_upload") {
    return NotText(at, type);
  }
  // Other block types (server tools' calls and results, which only Anthropic's servers
  // produce) are skipped (spec §3.4).
  return Status::Ok();
}

Status MessageSchema(const Json& m, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(ExpectKind(m, at, kObject));
  FLASHKV_RETURN_IF_ERROR(Optional(m, at, "role", kString));
  FLASHKV_RETURN_IF_ERROR(Required(m, at, "content", kString | kArray));
  const Json& content = m["content"];
  if (!content.is_array()) return Status::Ok();
  for (size_t k = 0; k < content.size(); ++k) {
    FLASHKV_RETURN_IF_ERROR(BlockSchema(content[k], Item(Field(at, "content"), k)));
  }
  return Status::Ok();
}

Status SystemSchema(const Json& body) {
  const Json* system = Find(body, "system");
  if (system == nullptr || !system->is_array()) return Status::Ok();
  for (size_t i = 0; i < system->size(); ++i) {
    const Json& part = (*system)[i];
    const std::string at = Item("system", i);
    FLASHKV_RETURN_IF_ERROR(ExpectKind(part, at, kString | kObject));
    if (part.is_string()) continue;
    FLASHKV_RETURN_IF_ERROR(OneOf(part, at, "type", {"text"}));
    FLASHKV_RETURN_IF_ERROR(Required(part, at, "text", kString));
    FLASHKV_RETURN_IF_ERROR(Optional(part, at, "cache_control", kObject | kNull));
  }
  return Status::Ok();
}

Status ToolSchema(const Json& tool, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(ExpectKind(tool, at, kObject));
  FLASHKV_RETURN_IF_ERROR(NonEmptyString(tool, at, "name"));
  FLASHKV_RETURN_IF_ERROR(Optional(tool, at, "type", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(tool, at, "description", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(tool, at, "cache_control", kObject | kNull));
  const Json* type = Find(tool, "type");
  if (type == nullptr || type->is_null() || *type == "custom") {
    return Required(tool, at, "input_schema", kObject);
  }
  const std::string& t = type->get_ref<const std::string&>();
  if (!IsVersionedToolType(t)) {
    return InvalidArgument(
        "'{}' must be \"custom\" or a server tool's versioned type (e.g. \"web_search_20250305\"); "
        "not \"{}\"",
        Field(at, "type"), t);
  }
  return Status::Ok();
}

Status ToolChoiceSchema(const Json& body) {
  const Json* tc = Find(body, "tool_choice");
  if (tc == nullptr || !tc->is_object()) return Status::Ok();  // the parser wants an object
  FLASHKV_RETURN_IF_ERROR(Required(*tc, "tool_choice", "type", kString));
  FLASHKV_RETURN_IF_ERROR(OneOf(*tc, "tool_choice", "type", {"auto", "any", "tool", "none"}));
  if ((*tc)["type"] == "tool") FLASHKV_RETURN_IF_ERROR(NonEmptyString(*tc, "tool_choice", "name"));
  FLASHKV_RETURN_IF_ERROR(
      Optional(*tc, "tool_choice", "disable_parallel_tool_use", kBoolean | kNull));
  return Status::Ok();
}

}  // namespace

Status ValidateAnthropicSchema(const Json& body) {
  if (const Json* msgs = Find(body, "messages"); msgs != nullptr && msgs->is_array()) {
    for (size_t i = 0; i < msgs->size(); ++i) {
      FLASHKV_RETURN_IF_ERROR(MessageSchema((*msgs)[i], Item("messages", i)));
    }
  }
  FLASHKV_RETURN_IF_ERROR(SystemSchema(body));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "tools", kArray | kNull));
  if (const Json* tools = Find(body, "tools"); tools != nullptr && tools->is_array()) {
    for (size_t i = 0; i < tools->size(); ++i) {
      FLASHKV_RETURN_IF_ERROR(ToolSchema((*tools)[i], Item("tools", i)));
    }
  }
  FLASHKV_RETURN_IF_ERROR(ToolChoiceSchema(body));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "model", kString | kNull));
  // Anthropic's ranges, narrower than OpenAI's.
  FLASHKV_RETURN_IF_ERROR(NumberIn(body, "", "temperature", 0, 1));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "metadata", kObject | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "service_tier", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "output_config", kObject | kNull));
  FLASHKV_RETURN_IF_ERROR(
      NotHonoured(body, "", "mcp_servers", "this server connects to no MCP servers"));
  FLASHKV_RETURN_IF_ERROR(NotHonoured(body, "", "container", "this server runs no containers"));
  if (const Json* oc = Find(body, "output_config"); oc != nullptr && oc->is_object()) {
    FLASHKV_RETURN_IF_ERROR(Optional(*oc, "output_config", "format", kObject | kNull));
    if (const Json* f = Find(*oc, "format"); f != nullptr && f->is_object()) {
      FLASHKV_RETURN_IF_ERROR(Required(*f, "output_config.format", "type", kString));
      FLASHKV_RETURN_IF_ERROR(OneOf(*f, "output_config.format", "type", {"json_schema"}));
    }
  }
  return ValidateThinkingSchema(body);
}

}  // namespace flashkv
