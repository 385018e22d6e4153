#include "server/request_schema.h"

#include "server/schema_checks.h"

namespace flashkv {
namespace {

using namespace schema;  // NOLINT: the check vocabulary of this file

constexpr int64_t kMaxTokenCount = (int64_t(1) << 31) - 1;

// A content array of the OpenAI chat API: text parts (an assistant's `refusal` parts too)
// and plain strings (ds4 concatenates them too). Images, audio and files are refused by
// name: the model reads text only, and a request answered without its image would look
// like an answer about it.
Status ContentPartsSchema(const Json& content, const std::string& at) {
  if (!content.is_array()) return Status::Ok();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pat = Item(at, i);
    FLASHKV_RETURN_IF_ERROR(ExpectKind(part, pat, kString | kObject));
    if (part.is_string()) continue;
    FLASHKV_RETURN_IF_ERROR(Optional(part, pat, "type", kString));
    const Json* type = Find(part, "type");
    if (type == nullptr || *type == "text") {
      FLASHKV_RETURN_IF_ERROR(Required(part, pat, "text", kString));
    } else if (*type == "refusal") {
      FLASHKV_RETURN_IF_ERROR(Required(part, pat, "refusal", kString));
    } else {
      return Unsupported("'{}' is a \"{}\" part: this server reads text parts only", pat,
                         type->get<std::string>());
    }
  }
  return Status::Ok();
}

Status ToolCallSchema(const Json& call, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(ExpectKind(call, at, kObject));
  FLASHKV_RETURN_IF_ERROR(Optional(call, at, "id", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(OneOf(call, at, "type", {"function", "custom"}));
  if (const Json* type = Find(call, "type"); type != nullptr && *type == "custom") {
    return Required(call, at, "custom", kObject);
  }
  FLASHKV_RETURN_IF_ERROR(Required(call, at, "function", kObject));
  const Json& fn = call["function"];
  const std::string fat = Field(at, "function");
  FLASHKV_RETURN_IF_ERROR(Required(fn, fat, "name", kString));
  FLASHKV_RETURN_IF_ERROR(Optional(fn, fat, "arguments", kString | kObject | kNull));
  return EmbeddedJson(fn, fat, "arguments");
}

Status ChatMessageSchema(const Json& m, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(ExpectKind(m, at, kObject));
  // A missing role means user (ds4); an explicit null is not a role.
  FLASHKV_RETURN_IF_ERROR(Optional(m, at, "role", kString));
  const Json* role = Find(m, "role");
  const bool assistant = role != nullptr && *role == "assistant";
  const Json* content = Find(m, "content");
  if (assistant) {
    FLASHKV_RETURN_IF_ERROR(Optional(m, at, "content", kString | kArray | kNull));
    if (content == nullptr && Find(m, "tool_calls") == nullptr) {
      return InvalidArgument("'{}' needs 'content' or 'tool_calls'", at);
    }
  } else {
    FLASHKV_RETURN_IF_ERROR(Required(m, at, "content", kString | kArray));
  }
  if (content != nullptr)
    FLASHKV_RETURN_IF_ERROR(ContentPartsSchema(*content, Field(at, "content")));
  FLASHKV_RETURN_IF_ERROR(Optional(m, at, "name", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(m, at, "tool_calls", kArray | kNull));
  if (const Json* calls = Find(m, "tool_calls"); calls != nullptr && calls->is_array()) {
    for (size_t k = 0; k < calls->size(); ++k) {
      FLASHKV_RETURN_IF_ERROR(ToolCallSchema((*calls)[k], Item(Field(at, "tool_calls"), k)));
    }
  }
  return Status::Ok();
}

// A function definition's fields: the prompt shows them to the model as they are.
Status FunctionSchema(const Json& fn, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(NonEmptyString(fn, at, "name"));
  FLASHKV_RETURN_IF_ERROR(Optional(fn, at, "description", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(fn, at, "parameters", kObject | kNull));
  return Optional(fn, at, "strict", kBoolean | kNull);
}

// Chat tools: {"type":"function","function":{…}}, the flat Responses form, a custom
// tool, or an Anthropic-shaped {name, input_schema} without a type (spec §4.4).
Status ChatToolSchema(const Json& tool, const std::string& at) {
  FLASHKV_RETURN_IF_ERROR(ExpectKind(tool, at, kObject));
  FLASHKV_RETURN_IF_ERROR(OneOf(tool, at, "type", {"function", "custom"}));
  const Json* type = Find(tool, "type");
  if (type != nullptr && *type == "custom") {
    FLASHKV_RETURN_IF_ERROR(Required(tool, at, "custom", kObject));
    return NonEmptyString(tool["custom"], Field(at, "custom"), "name");
  }
  if (type != nullptr && type->is_string()) {
    if (Find(tool, "function") == nullptr && Find(tool, "name") == nullptr) {
      return InvalidArgument("'{}' is required", Field(at, "function"));
    }
    if (Find(tool, "function") != nullptr) {
      FLASHKV_RETURN_IF_ERROR(Required(tool, at, "function", kObject));
      return FunctionSchema(tool["function"], Field(at, "function"));
    }
    return FunctionSchema(tool, at);
  }
  FLASHKV_RETURN_IF_ERROR(NonEmptyString(tool, at, "name"));
  FLASHKV_RETURN_IF_ERROR(Optional(tool, at, "description", kString | kNull));
  return Optional(tool, at, "input_schema", kObject | kNull);
}

Status ChatToolChoiceSchema(const Json& body) {
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "tool_choice", kString | kObject | kNull));
  const Json* tc = Find(body, "tool_choice");
  if (tc == nullptr) return Status::Ok();
  if (tc->is_string()) {
    return OneOf(body, "", "tool_choice", {"none", "auto", "required"});
  }
  if (!tc->is_object()) return Status::Ok();
  FLASHKV_RETURN_IF_ERROR(Required(*tc, "tool_choice", "type", kString));
  FLASHKV_RETURN_IF_ERROR(
      OneOf(*tc, "tool_choice", "type", {"function", "allowed_tools", "custom"}));
  if ((*tc)["type"] == "function") {
    FLASHKV_RETURN_IF_ERROR(Required(*tc, "tool_choice", "function", kObject));
    return NonEmptyString((*tc)["function"], "tool_choice.function", "name");
  }
  return Unsupported(
      "'tool_choice.type' \"{}\" is not supported; use \"auto\", \"none\", "
      "\"required\" or a function",
      (*tc)["type"].get<std::string>());
}

Status ResponseFormatSchema(const Json& body) {
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "response_format", kObject | kNull));
  const Json* rf = Find(body, "response_format");
  if (rf == nullptr || rf->is_null()) return Status::Ok();
  FLASHKV_RETURN_IF_ERROR(Required(*rf, "response_format", "type", kString));
  FLASHKV_RETURN_IF_ERROR(
      OneOf(*rf, "response_format", "type", {"text", "json_object", "json_schema"}));
  if ((*rf)["type"] != "json_schema") return Status::Ok();
  FLASHKV_RETURN_IF_ERROR(Required(*rf, "response_format", "json_schema", kObject));
  const Json& js = (*rf)["json_schema"];
  FLASHKV_RETURN_IF_ERROR(Optional(js, "response_format.json_schema", "name", kString));
  FLASHKV_RETURN_IF_ERROR(Optional(js, "response_format.json_schema", "strict", kBoolean | kNull));
  return Optional(js, "response_format.json_schema", "schema", kObject | kBoolean | kNull);
}

// One choice per request: a client asking for more must not silently get one.
Status SingleChoice(const Json& body, std::string_view key) {
  FLASHKV_RETURN_IF_ERROR(IntegerIn(body, "", key, 1, kMaxTokenCount));
  const Json* n = Find(body, key);
  if (n != nullptr && n->is_number() && n->get<double>() != 1) {
    return Unsupported("'{}' must be 1: this server returns one choice per request", key);
  }
  return Status::Ok();
}

// What chat and completions share beyond the fields ApiRequest parses.
Status OpenAiCommonSchema(const Json& body) {
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "model", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(SingleChoice(body, "n"));
  FLASHKV_RETURN_IF_ERROR(NumberIn(body, "", "presence_penalty", -2, 2));
  FLASHKV_RETURN_IF_ERROR(NumberIn(body, "", "frequency_penalty", -2, 2));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "logit_bias", kObject | kNull));
  FLASHKV_RETURN_IF_ERROR(
      NotHonoured(body, "", "presence_penalty", "the sampler has no penalties"));
  FLASHKV_RETURN_IF_ERROR(
      NotHonoured(body, "", "frequency_penalty", "the sampler has no penalties"));
  FLASHKV_RETURN_IF_ERROR(NotHonoured(body, "", "logit_bias", "the sampler takes no token biases"));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "user", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "metadata", kObject | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "store", kBoolean | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "service_tier", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "stream_options", kObject | kNull));
  return ValidateThinkingSchema(body);
}

}  // namespace

Status ValidateThinkingSchema(const Json& body) {
  const Json* thinking = Find(body, "thinking");
  if (thinking == nullptr || !thinking->is_object()) return Status::Ok();
  return IntegerIn(*thinking, "thinking", "budget_tokens", 1, kMaxTokenCount);
}

Status ValidateChatCompletionsSchema(const Json& body) {
  if (const Json* msgs = Find(body, "messages"); msgs != nullptr && msgs->is_array()) {
    for (size_t i = 0; i < msgs->size(); ++i) {
      FLASHKV_RETURN_IF_ERROR(ChatMessageSchema((*msgs)[i], Item("messages", i)));
    }
  }
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "tools", kArray | kNull));
  if (const Json* tools = Find(body, "tools"); tools != nullptr && tools->is_array()) {
    for (size_t i = 0; i < tools->size(); ++i) {
      FLASHKV_RETURN_IF_ERROR(ChatToolSchema((*tools)[i], Item("tools", i)));
    }
  }
  FLASHKV_RETURN_IF_ERROR(ChatToolChoiceSchema(body));
  FLASHKV_RETURN_IF_ERROR(ResponseFormatSchema(body));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "parallel_tool_calls", kBoolean | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "logprobs", kBoolean | kNull));
  FLASHKV_RETURN_IF_ERROR(IntegerIn(body, "", "top_logprobs", 0, 20));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "modalities", kArray | kNull));
  if (const Json* mod = Find(body, "modalities"); mod != nullptr && mod->is_array()) {
    for (const Json& m : *mod) {
      if (m != "text") return Unsupported("'modalities' may hold only \"text\"");
    }
  }
  FLASHKV_RETURN_IF_ERROR(NotHonoured(body, "", "audio", "the model produces text only"));
  FLASHKV_RETURN_IF_ERROR(NotHonoured(body, "", "functions", "declare them in 'tools'"));
  FLASHKV_RETURN_IF_ERROR(NotHonoured(body, "", "function_call", "use 'tool_choice'"));
  FLASHKV_RETURN_IF_ERROR(
      NotHonoured(body, "", "web_search_options", "this server has no search tool"));
  return OpenAiCommonSchema(body);
}

Status ValidateCompletionsSchema(const Json& body) {
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "echo", kBoolean | kNull));
  FLASHKV_RETURN_IF_ERROR(Optional(body, "", "suffix", kString | kNull));
  FLASHKV_RETURN_IF_ERROR(IntegerIn(body, "", "logprobs", 0, 5));
  FLASHKV_RETURN_IF_ERROR(SingleChoice(body, "best_of"));
  FLASHKV_RETURN_IF_ERROR(
      NotHonoured(body, "", "echo", "the reply carries the generated text only"));
  FLASHKV_RETURN_IF_ERROR(
      NotHonoured(body, "", "suffix", "the model has no fill-in-the-middle mode"));
  if (const Json* p = Find(body, "prompt"); p != nullptr && p->is_array() && p->size() > 1) {
    return Unsupported("'prompt' holds {} prompts: this server answers one per request", p->size());
  }
  return OpenAiCommonSchema(body);
}

Status ValidateRequestSchema(Dialect dialect, const Json& body) {
  switch (dialect) {
    case Dialect::kChatCompletions:
      return ValidateChatCompletionsSchema(body);
    case Dialect::kCompletions:
      return ValidateCompletionsSchema(body);
    case Dialect::kResponses:
      return ValidateResponsesSchema(body);
    case Dialect::kAnthropic:
      return ValidateAnthropicSchema(body);
  }
  return Internal("unknown dialect");
}

}  // namespace flashkv
