#include "server/anthropic_messages.h"

#include "chat/dsml.h"
#include "server/sse.h"
#include "server/usage.h"

namespace flashkv {
namespace {

// Claude Code prepends a system block "x-anthropic-billing-header: …" that changes on
// every request; kept, it would make every prompt differ from the first bytes on.
constexpr std::string_view kVolatileSystemPrefix = "x-anthropic-";

Expected<std::string> SystemText(const Json& system) {
  if (system.is_null()) return std::string();
  if (system.is_string()) {
    std::string s = system.get<std::string>();
    return s.starts_with(kVolatileSystemPrefix) ? std::string() : s;
  }
  if (!system.is_array())
    return InvalidArgument("'system' must be a string or an array of text blocks");
  std::string out;
  bool first = true;
  for (const Json& part : system) {
    std::string text;
    if (part.is_string()) {
      text = part.get<std::string>();
    } else if (part.is_object()) {
      auto t = part.find("text");
      if (t == part.end() || !t->is_string()) continue;
      text = t->get<std::string>();
    } else {
      return InvalidArgument("'system' entries must be strings or text blocks, not {}",
                             JsonTypeName(part));
    }
    if (text.starts_with(kVolatileSystemPrefix)) continue;
    if (!first) out += "\n";
    out += text;
    first = false;
  }
  return out;
}

Expected<std::string> ToolResultText(const Json& content, const std::string& where) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    return InvalidArgument("'{}' must be a string or an array of blocks", where);
  std::string out;
  for (const Json& b : content) {
    if (b.is_object()) {
      auto t = b.find("text");
      if (t != b.end() && t->is_string()) out += t->get<std::string>();
    }
  }
  return out;
}

// `result_ids`: receives the tool_use_id of each tool_result block.
Expected<ChatMessage> ParseMessage(const Json& m, size_t i, std::vector<std::string>* result_ids) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object())
    return InvalidArgument("'{}' must be an object, not {}", where, JsonTypeName(m));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> role, OptString(m, "role"));
  ChatMessage msg;
  if (!role || *role == "user") {
    msg.role = ChatRole::kUser;
  } else if (*role == "assistant") {
    msg.role = ChatRole::kAssistant;
  } else if (*role == "system") {
    // A mid-conversation system message (Claude Code's environment, agent and skill
    // listing, sent with the anthropic-beta mid-conversation-system feature): its text
    // blocks are system text at this point of the conversation.
    msg.role = ChatRole::kSystem;
  } else {
    return InvalidArgument("'{}.role' must be \"user\", \"assistant\" or \"system\", not \"{}\"",
                           where, *role);
  }
  auto content = m.find("content");
  if (content == m.end() || content->is_null()) return msg;
  if (content->is_string()) {
    msg.content = content->get<std::string>();
    return msg;
  }
  if (!content->is_array()) {
    return InvalidArgument("'{}.content' must be a string or an array of blocks, not {}", where,
                           JsonTypeName(*content));
  }
  for (size_t k = 0; k < content->size(); ++k) {
    const Json& b = (*content)[k];
    const std::string bwhere = where + ".content[" + std::to_string(k) + "]";
    if (!b.is_object())
      return InvalidArgument("'{}' must be an object, not {}", bwhere, JsonTypeName(b));
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> type, OptString(b, "type"));
    if (!type) return InvalidArgument("'{}.type' is required", bwhere);
    if (*type == "text") {
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> text, OptString(b, "text"));
      msg.content += text.value_or("");
    } else if (*type == "thinking" && msg.role == ChatRole::kAssistant) {
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> thinking, OptString(b, "thinking"));
      msg.reasoning += thinking.value_or("");
    } else if (*type == "tool_use" && msg.role == ChatRole::kAssistant) {
      ToolCall call;
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> id, OptString(b, "id"));
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> name, OptString(b, "name"));
      if (!name || name->empty()) return InvalidArgument("'{}.name' is required", bwhere);
      call.id = id.value_or("");
      call.name = *name;
      auto input = b.find("input");
      call.arguments = input == b.end() || input->is_null() ? "{}" : DumpJson(*input);
      msg.tool_calls.push_back(std::move(call));
    } else if (*type == "tool_result" && msg.role == ChatRole::kUser) {
      // Inline in the user turn, as ds4 renders it: text blocks that follow the results
      // (Claude Code's reminders) stay in the same turn.
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> use_id, OptString(b, "tool_use_id"));
      if (use_id && !use_id->empty()) result_ids->push_back(*use_id);
      auto c = b.find("content");
      FLASHKV_ASSIGN_OR_RETURN(std::string text, c == b.end()
                                                     ? Expected<std::string>(std::string())
                                                     : ToolResultText(*c, bwhere + ".content"));
      msg.content += "<tool_result>" + EscapeToolResult(text) + "</tool_result>";
    }
    // Other blocks (images, documents, redacted thinking, server tools) are skipped.
  }
  return msg;
}

class AnthropicStream : public StreamEncoder {
 public:
  explicit AnthropicStream(const ResponseContext& ctx) : ctx_(ctx) {}

  std::string Start(const CacheInfo& cache) override {
    GenerationResult zero;
    zero.cache = cache;
    Json message{{"id", ctx_.id},
                 {"type", "message"},
                 {"role", "assistant"},
                 {"model", ctx_.model},
                 {"content", Json::array()},
                 {"stop_reason", nullptr},
                 {"stop_sequence", nullptr},
                 {"usage", AnthropicUsage(zero)}};
    return SseEvent("message_start", {{"type", "message_start"}, {"message", std::move(message)}});
  }

  std::string Delta(const GenerationEvent& ev) override {
    if (ev.kind != GenerationEvent::Kind::kChat) return {};
    const ChatEvent& c = ev.chat;
    std::string out;
    switch (c.kind) {
      case ChatEvent::Kind::kReasoning:
        if (c.text.empty()) return {};
        out += Open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}});
        out += BlockDelta({{"type", "thinking_delta"}, {"thinking", c.text}});
        return out;
      case ChatEvent::Kind::kContent:
        if (c.text.empty()) return {};
        out += Open(Block::kText, {{"type", "text"}, {"text", ""}});
        out += BlockDelta({{"type", "text_delta"}, {"text", c.text}});
        return out;
      case ChatEvent::Kind::kToolCallBegin:
        out += Close();
        out += Open(Block::kToolUse, {{"type", "tool_use"},
                                      {"id", ev.tool_call_id},
                                      {"name", c.text},
                                      {"input", Json::object()}});
        return out;
      case ChatEvent::Kind::kToolCallArguments:
        if (open_ != Block::kToolUse) return {};
        return BlockDelta({{"type", "input_json_delta"}, {"partial_json", c.text}});
      case ChatEvent::Kind::kToolCallEnd:
        return Close();
      default:
        return {};
    }
  }

  std::string Finish(const GenerationResult& r) override {
    // A reply that stopped inside its thinking has no text block: an empty one would be
    // replayed by the client as an empty text block, which the Messages API refuses.
    std::string out = Close();
    Json delta{{"stop_reason", AnthropicStopReason(r)},
               {"stop_sequence", r.stop_sequence.empty() ? Json(nullptr) : Json(r.stop_sequence)}};
    Json usage = AnthropicUsage(r);
    out += SseEvent(
        "message_delta",
        {{"type", "message_delta"}, {"delta", std::move(delta)}, {"usage", std::move(usage)}});
    out += SseEvent("message_stop", {{"type", "message_stop"}});
    return out;
  }

  std::string Error(const std::string& message) override {
    return SseEvent("error",
                    {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}});
  }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  std::string Open(Block b, Json block) {
    if (open_ == b && b != Block::kToolUse) return {};
    std::string out = Close();
    open_ = b;
    out += SseEvent(
        "content_block_start",
        {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}});
    return out;
  }
  std::string BlockDelta(Json delta) {
    return SseEvent(
        "content_block_delta",
        {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  }
  std::string Close() {
    if (open_ == Block::kNone) return {};
    std::string out;
    if (open_ == Block::kThinking) {
      // The signature is opaque to clients; they send it back and flashkv ignores it.
      out += BlockDelta({{"type", "signature_delta"}, {"signature", ctx_.id}});
    }
    out += SseEvent("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_ = Block::kNone;
    ++index_;
    return out;
  }

  ResponseContext ctx_;
  Block open_ = Block::kNone;
  int index_ = 0;
};

}  // namespace

const char* AnthropicStopReason(const GenerationResult& r) {
  if (!r.stop_sequence.empty()) return "stop_sequence";
  switch (r.finish) {
    case FinishReason::kToolCalls:
      return "tool_use";
    case FinishReason::kLength:
      return "max_tokens";
    default:
      return "end_turn";
  }
}

Expected<ApiRequest> ParseAnthropicRequest(const Json& body) {
  ApiRequest req;
  req.dialect = Dialect::kAnthropic;
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
    return InvalidArgument("'messages' must be a non-empty array");
  }
  if (auto sys = body.find("system"); sys != body.end()) {
    FLASHKV_ASSIGN_OR_RETURN(std::string system, SystemText(*sys));
    if (!system.empty())
      req.messages.push_back(ChatMessage{ChatRole::kSystem, system, {}, {}, {}, {}});
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    std::vector<std::string> result_ids;
    FLASHKV_ASSIGN_OR_RETURN(ChatMessage m, ParseMessage((*msgs)[i], i, &result_ids));
    // A result answers a tool_use replayed earlier in `messages`: no conversation state is
    // kept between requests, so a call only the server would remember cannot be rendered.
    for (const std::string& id : result_ids) {
      bool found = false;
      for (const ChatMessage& prior : req.messages) {
        for (const ToolCall& c : prior.tool_calls) found |= c.id == id;
      }
      if (!found) {
        return InvalidArgument(
            "Anthropic continuation state is not available for tool_use_id {}; retry by "
            "replaying the full messages history",
            id);
      }
    }
    req.messages.push_back(std::move(m));
  }
  bool has_turn = false;
  for (const ChatMessage& m : req.messages) has_turn |= m.role != ChatRole::kSystem;
  if (!has_turn) return InvalidArgument("'messages' has no user or assistant message");
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> model, OptString(body, "model"));
  req.model = model.value_or("");
  std::optional<std::string> effort;
  if (auto oc = body.find("output_config"); oc != body.end() && oc->is_object()) {
    FLASHKV_ASSIGN_OR_RETURN(effort, OptString(*oc, "effort"));
  }
  if (!effort) {
    FLASHKV_ASSIGN_OR_RETURN(effort, OptString(body, "reasoning_effort"));
  }
  FLASHKV_ASSIGN_OR_RETURN(req.thinking, ParseThinking(body, effort, req.model));
  // min_p and seed are not Messages fields (docs/SERVER.md §5.4).
  FLASHKV_RETURN_IF_ERROR(ParseSampling(OnlyKeys(body, {"temperature", "top_p", "top_k"}), &req));
  FLASHKV_ASSIGN_OR_RETURN(req.max_tokens, ParseMaxTokens(body, {"max_tokens"}));
  FLASHKV_RETURN_IF_ERROR(ParseStop(body, "stop_sequences", &req.stop));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<bool> stream, OptBool(body, "stream"));
  req.stream = stream.value_or(false);

  FLASHKV_RETURN_IF_ERROR(ParseTools(body, &req.tools));
  // cache_control marks move between requests; in the prompt they would break reuse.
  for (Json& t : req.tools) t.erase("cache_control");
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (!tc->is_object())
      return InvalidArgument("'tool_choice' must be an object, not {}", JsonTypeName(*tc));
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> type, OptString(*tc, "type"));
    if (type == "none") req.tools.clear();
    if (type == "any") FLASHKV_RETURN_IF_ERROR(ForceToolCall({}, "tool_choice", &req));
    if (type == "tool") {
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> name, OptString(*tc, "name"));
      if (name) FLASHKV_RETURN_IF_ERROR(ForceToolCall({*name}, "tool_choice.name", &req));
    }
    // A forced call does not think, so the client's sampling knobs apply.
    if (req.constraint) {
      FLASHKV_RETURN_IF_ERROR(
          ParseSampling(OnlyKeys(body, {"temperature", "top_p", "top_k"}), &req));
    }
  }
  if (auto oc = body.find("output_config"); oc != body.end() && oc->is_object()) {
    if (auto format = oc->find("format"); format != oc->end()) {
      FLASHKV_RETURN_IF_ERROR(ParseStructuredOutput(&*format, "output_config.format", &req));
      // Constrained requests do not think, so the client's sampling knobs apply.
      if (req.constraint) {
        FLASHKV_RETURN_IF_ERROR(
            ParseSampling(OnlyKeys(body, {"temperature", "top_p", "top_k"}), &req));
      }
    }
  }
  return req;
}

Json AnthropicResponse(const ResponseContext& ctx, const GenerationResult& r) {
  Json content = Json::array();
  if (!r.parsed.reasoning.empty()) {
    content.push_back(
        {{"type", "thinking"}, {"thinking", r.parsed.reasoning}, {"signature", ctx.id}});
  }
  if (!r.parsed.content.empty()) content.push_back({{"type", "text"}, {"text", r.parsed.content}});
  for (size_t i = 0; i < r.parsed.tool_calls.size(); ++i) {
    Json input = Json::parse(r.parsed.tool_calls[i].arguments, nullptr, /*allow_exceptions=*/false);
    if (!input.is_object()) input = Json::object();
    content.push_back({{"type", "tool_use"},
                       {"id", r.tool_call_ids[i]},
                       {"name", r.parsed.tool_calls[i].name},
                       {"input", std::move(input)}});
  }
  return Json{{"id", ctx.id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", ctx.model},
              {"content", std::move(content)},
              {"stop_reason", AnthropicStopReason(r)},
              {"stop_sequence", r.stop_sequence.empty() ? Json(nullptr) : Json(r.stop_sequence)},
              {"usage", AnthropicUsage(r)}};
}

std::unique_ptr<StreamEncoder> NewAnthropicStream(const ResponseContext& ctx) {
  return std::make_unique<AnthropicStream>(ctx);
}

}  // namespace flashkv
