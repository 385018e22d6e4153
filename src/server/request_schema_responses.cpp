// The OpenAI Responses schema (POST /v1/responses). Item `status` is any string: Codex
// replays items it saw "incomplete" or "in_progress".
#include <array>
#include <string_view>

#include "server/request_schema.h"
#include "server/schema_checks.h"

namespace flashkv {
namespace {

using namespace schema;  // NOLINT: the check vocabulary of this file

// Tool types of the Responses API (function and custom tools, Codex's namespace groups and
// tool_search, and the hosted tools clients declare).
constexpr std::array<std::string_view, 15> kToolTypes = {
    "function",    "custom",           "namespace",
    "tool_search", "local_shell",      "shell",
    "apply_patch", "web_search",       "web_search_preview",
    "file_search", "code_interpreter", "computer_use_preview",
    "computer",    "image_generation", "mcp"};

bool IsToolType(const std::string& type) {
  for (std::string_view t : kToolTypes) {
    if (type == t) return true;
  }
  return false;
}

Status MessageItemSchema(const Json& item, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(Optional(item, at, "role", kString));
  FLASHKV_RETURN_IF_ERROR(Required(item, at, "content", kString | kArray));
  const Json& content = item["content"];
  if (!content.is_array()) return Status::Ok();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pat = Item(Field(at, "content"), i);
    FLASHKV_RETURN_IF_ERROR(ExpectKind(part, pat, kObject));
    FLASHKV_RETURN_IF_ERROR(Required(part, pat, "type", kString));
    const Json& type = part["type"];
    if (type == "input_text" || type == "output_text" || type == "text" || type == "summary_text" ||
        type == "reasoning_text") {
      FLASHKV_RETURN_IF_ERROR(Required(part, pat, "text", kString));
    }
  }
  return Status::Ok();
}

// Call arguments: an object, or JSON text the prompt renderer parses (so bounded).
Status ArgumentsSchema(const Json& item, const std::string& at, const char* key) {
  FLASHKV_RETURN_IF_ERROR(Optional(item, at, key, kString | kObject | kNull));
  return EmbeddedJson(item, at, key);
}

Status ReasoningItemSchema(const Json& item, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(Optional(item, at, "encrypted_content", kString | kNull));
  for (const char* key : {"summary", "content"}) {
    FLASHKV_RETURN_IF_ERROR(Optional(item, at, key, kArray | kNull));
    const Json* parts = Find(item, key);
    if (parts == nullptr || !parts->is_array()) continue;
    for (size_t i = 0; i < parts->size(); ++i) {
      const std::string pat = Item(Field(at, key), i);
      FLASHKV_RETURN_IF_ERROR(ExpectKind((*parts)[i], pat, kObject));
      FLASHKV_RETURN_IF_ERROR(Required((*parts)[i], pat, "text", kString));
    }
  }
  return Status::Ok();
}

Status InputItemSchema(const Json& item, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(ExpectKind(item, at, kObject));
  FLASHKV_RETURN_IF_ERROR(Optional(item, at, "type", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(item, at, "status", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(item, at, "id", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(item, at, "call_id", kString | kNull));
  const Json* type_field = Find(item, "type");
  const std::string type =
      type_field != nullptr && type_field->is_string() ? type_field->get<std::string>() : "message";
  if (type == "message") return MessageItemSchema(item, at);
  if (type == "function_call") {
    FLASHKV_RETURN_IF_ERROR(NonEmptyString(item, at, "name"));
    return ArgumentsSchema(item, at, "arguments");
  }
  if (type == "custom_tool_call") {
    // Free-form text, rendered as a JSON string value: never parsed.
    FLASHKV_RETURN_IF_ERROR(NonEmptyString(item, at, "name"));
    return Optional(item, at, "input", kString | kNull);
  }
  if (type.ends_with("_call")) {
    // Hosted calls (local_shell_call, tool_search_call, ...): whichever key they carry.
    for (const char* key : {"action", "arguments", "input"}) {
      FLASHKV_RETURN_IF_ERROR(ArgumentsSchema(item, at, key));
    }
    return Status::Ok();
  }
  if (type == "function_call_output" || type == "custom_tool_call_output") {
    FLASHKV_RETURN_IF_ERROR(Required(item, at, "call_id", kString));
    return Optional(item, at, "output", kString | kArray | kObject | kNull);
  }
  if (type == "reasoning") return ReasoningItemSchema(item, at);
  return Status::Ok();  // the parser decides which other types exist
}

Status ToolSchema(const Json& tool, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(ExpectKind(tool, at, kObject));
  FLASHKV_RETURN_IF_ERROR(Required(tool, at, "type", kString));
  const std::string& type = tool["type"].get_ref<const std::string&>();
  if (!IsToolType(type)) {
    return InvalidArgument("'{}' \"{}\" is not a Responses tool type", Field(at, "type"), type);
  }
  if (type == "function") {
    FLASHKV_RETURN_IF_ERROR(NonEmptyString(tool, at, "name"));
    FLASHKV_RETURN_IF_ERROR(Optional(tool, at, "description", kString | kNull));
    FLASHKV_RETURN_IF_ERROR(Optional(tool, at, "parameters", kObject | kNull));
    return Optional(tool, at, "strict", kBoolean | kNull);
  }
  if (type == "custom") {
    FLASHKV_RETURN_IF_ERROR(NonEmptyString(tool, at, "name"));
    FLASHKV_RETURN_IF_ERROR(Optional(tool, at, "description", kString | kNull));
    return Optional(tool, at, "format", kObject | kNull);
  }
  return Status::Ok();
}

Status TextSchema(const Json& body) {
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "text", kObject | kNull));
  const Json* text = Find(body, "text");
  if (text == nullptr || text->is_null()) return Status::Ok();
  FLASHKV_RETURN_IF_ERROR(OneOf(*text, "text", "verbosity", {"low", "medium", "high"}));
  FLASHKV_RETURN_IF_ERROR(Optional(*text, "text", "format", kObject | kNull));
  const Json* format = Find(*text, "format");
  if (format == nullptr || format->is_null()) return Status::Ok();
  FLASHKV_RETURN_IF_ERROR(Required(*format, "text.format", "type", kString));
  FLASHKV_RETURN_IF_ERROR(
      OneOf(*format, "text.format", "type", {"text", "json_schema", "json_object"}));
  return Optional(*format, "text.format", "schema", kObject | kBoolean | kNull);
}

}  // namespace

Status ValidateResponsesSchema(const Json& body) {
  if (const Json* input = Find(body, "input"); input != nullptr && input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i) {
      FLASHKV_RETURN_IF_ERROR(InputItemSchema((*input)[i], Item("input", i)));
    }
  }
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "tools", kArray | kNull));
  if (const Json* tools = Find(body, "tools"); tools != nullptr && tools->is_array()) {
    for (size_t i = 0; i < tools->size(); ++i) {
      FLASHKV_RETURN_IF_ERROR(ToolSchema((*tools)[i], Item("tools", i)));
    }
  }
  if (const Json* r = Find(body, "reasoning"); r != nullptr && r->is_object()) {
    FLASHKV_RETURN_IF_ERROR(
        OneOf(*r, "reasoning", "summary", {"auto", "concise", "detailed", "none"}));
  }
  FLASHKV_RETURN_IF_ERROR(TextSchema(body));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "model", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "parallel_tool_calls", kBoolean | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "store", kBoolean | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "include", kArray | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "prompt_cache_key", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "metadata", kObject | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "user", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "service_tier", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(OneOf(body, "", "truncation", {"auto", "disabled"}));
  FLASHKV_RETURN_IF_ERROR(IntegerIn(body, "", "max_tool_calls", 1, int64_t(1) << 30));
  FLASHKV_RETURN_IF_ERROR(NotHonoured(body, "", "background", "replies are given in the request"));
  FLASHKV_RETURN_IF_ERROR(
      NotHonoured(body, "", "prompt", "this server stores no prompt templates"));
  return IntegerIn(body, "", "top_logprobs", 0, 20);
}

}  // namespace flashkv
