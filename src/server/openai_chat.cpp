#include "server/openai_chat.h"

#include <utility>

#include "server/logprobs_json.h"
#include "server/sse.h"
#include "server/usage.h"

namespace flashkv {
namespace {

Expected<ToolCall> ParseToolCall(const Json& c, const std::string& where) {
  if (!c.is_object())
    return InvalidArgument("{} must be an object, not {}", where, JsonTypeName(c));
  ToolCall call;
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> id, OptString(c, "id"));
  call.id = id.value_or("");
  auto fn = c.find("function");
  if (fn == c.end() || !fn->is_object()) return call;  // dropped by the caller (no name)
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> name, OptString(*fn, "name"));
  call.name = name.value_or("");
  auto args = fn->find("arguments");
  if (args != fn->end() && !args->is_null()) {
    call.arguments = args->is_string() ? args->get<std::string>() : DumpJson(*args);
  }
  return call;
}

Expected<ChatMessage> ParseMessage(const Json& m, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object())
    return InvalidArgument("'{}' must be an object, not {}", where, JsonTypeName(m));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> role, OptString(m, "role"));
  ChatMessage msg;
  const std::string r = role.value_or("user");
  if (r == "system" || r == "developer") {
    msg.role = ChatRole::kSystem;
  } else if (r == "user") {
    msg.role = ChatRole::kUser;
  } else if (r == "assistant") {
    msg.role = ChatRole::kAssistant;
  } else if (r == "tool" || r == "function") {
    msg.role = ChatRole::kTool;
  } else {
    return InvalidArgument(
        "'{}.role' \"{}\" is not one of system, developer, user, assistant, tool", where, r);
  }
  if (auto c = m.find("content"); c != m.end()) {
    FLASHKV_ASSIGN_OR_RETURN(msg.content, ContentText(*c, "'" + where + ".content'"));
  }
  if (msg.role == ChatRole::kAssistant) {
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> reasoning,
                             OptString(m, "reasoning_content"));
    msg.reasoning = reasoning.value_or("");
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
      if (!tc->is_array()) return InvalidArgument("'{}.tool_calls' must be an array", where);
      for (size_t k = 0; k < tc->size(); ++k) {
        FLASHKV_ASSIGN_OR_RETURN(
            ToolCall call,
            ParseToolCall((*tc)[k], "'" + where + ".tool_calls[" + std::to_string(k) + "]'"));
        // Calls without a name or arguments cannot be rendered; ds4 drops them too.
        if (call.name.empty() || call.arguments.empty()) continue;
        msg.tool_calls.push_back(std::move(call));
      }
    }
  }
  if (msg.role == ChatRole::kTool) {
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> id, OptString(m, "tool_call_id"));
    msg.tool_call_id = id.value_or("");
  }
  return msg;
}

// Fields shared by chat and completions.
Status ParseCommon(const Json& body, const std::optional<std::string>& effort, ApiRequest* req) {
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> model, OptString(body, "model"));
  req->model = model.value_or("");
  // A request that names no model gets DeepSeek's default model, deepseek-chat, which does
  // not think: a bare curl shows its answer in `content` (docs/SERVER.md §5.5).
  const ThinkingMode fallback = model ? ThinkingMode::kHigh : ThinkingMode::kNone;
  FLASHKV_ASSIGN_OR_RETURN(req->thinking, ParseThinking(body, effort, req->model, fallback));
  FLASHKV_RETURN_IF_ERROR(ParseSampling(body, req));
  FLASHKV_ASSIGN_OR_RETURN(req->max_tokens,
                           ParseMaxTokens(body, {"max_completion_tokens", "max_tokens"}));
  FLASHKV_RETURN_IF_ERROR(ParseStop(body, "stop", &req->stop));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<bool> stream, OptBool(body, "stream"));
  req->stream = stream.value_or(false);
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) return InvalidArgument("'stream_options' must be an object");
    FLASHKV_ASSIGN_OR_RETURN(std::optional<bool> usage, OptBool(*so, "include_usage"));
    req->include_usage = usage.value_or(false);
  }
  return Status::Ok();
}

bool ToolChoiceNone(const Json& body) {
  auto it = body.find("tool_choice");
  return it != body.end() && it->is_string() && it->get<std::string>() == "none";
}

Json ChunkJson(const ResponseContext& ctx, const char* object, Json choice) {
  return Json{{"id", ctx.id},
              {"object", object},
              {"created", ctx.created},
              {"model", ctx.model},
              {"choices", Json::array({std::move(choice)})}};
}

// The logprobs a stream has received from the engine and not sent yet. Events carry them
// ahead of or with their text, and the result holds them all, so Rest() finds those that
// never rode on an event.
class LogprobQueue {
 public:
  void Add(const GenerationEvent& ev) {
    received_ += ev.logprobs.size();
    for (const TokenLogprob& t : ev.logprobs) {
      if (!t.reasoning) pending_.push_back(t);
    }
  }
  // The answer tokens received so far, once.
  std::vector<TokenLogprob> Take() { return std::exchange(pending_, {}); }
  // At the end: everything not sent yet.
  std::vector<TokenLogprob> Rest(const GenerationResult& r) {
    for (size_t i = received_; i < r.logprobs.size(); ++i) {
      if (!r.logprobs[i].reasoning) pending_.push_back(r.logprobs[i]);
    }
    received_ = r.logprobs.size();
    return Take();
  }

 private:
  size_t received_ = 0;
  std::vector<TokenLogprob> pending_;
};

class ChatStream : public StreamEncoder {
 public:
  explicit ChatStream(const ResponseContext& ctx) : ctx_(ctx) {}

  std::string Start(const CacheInfo&) override {
    return Chunk({{"role", "assistant"}, {"content", ""}});
  }

  std::string Delta(const GenerationEvent& ev) override {
    if (ev.kind != GenerationEvent::Kind::kChat) return {};
    logprobs_.Add(ev);
    const ChatEvent& c = ev.chat;
    switch (c.kind) {
      case ChatEvent::Kind::kReasoning:
        return c.text.empty() ? std::string() : Chunk({{"reasoning_content", c.text}});
      case ChatEvent::Kind::kContent:
        return c.text.empty() ? std::string() : Chunk({{"content", c.text}}, true);
      case ChatEvent::Kind::kToolCallBegin:
        return Chunk(
            {{"tool_calls", Json::array({{{"index", c.call_index},
                                          {"id", ev.tool_call_id},
                                          {"type", "function"},
                                          {"function", {{"name", c.text}, {"arguments", ""}}}}})}},
            true);
      case ChatEvent::Kind::kToolCallArguments:
        return Chunk(
            {{"tool_calls",
              Json::array({{{"index", c.call_index}, {"function", {{"arguments", c.text}}}}})}},
            true);
      default:
        return {};
    }
  }

  std::string Finish(const GenerationResult& r) override {
    Json choice{{"index", 0},
                {"delta", Json::object()},
                {"logprobs", ctx_.logprobs ? ChatLogprobs(logprobs_.Rest(r)) : Json(nullptr)},
                {"finish_reason", OpenAiFinishReason(r.finish)}};
    std::string out = SseData(ChunkJson(ctx_, "chat.completion.chunk", std::move(choice)));
    if (ctx_.include_usage) {
      Json u{{"id", ctx_.id},       {"object", "chat.completion.chunk"}, {"created", ctx_.created},
             {"model", ctx_.model}, {"choices", Json::array()},          {"usage", OpenAiUsage(r)}};
      out += SseData(u);
    }
    return out + SseDone();
  }

  std::string Error(const std::string& message) override {
    return SseEvent("error", Json{{"error", {{"message", message}, {"type", "server_error"}}}}) +
           SseDone();
  }

 private:
  // `answer`: a delta of the visible answer, which carries the answer tokens received so far.
  std::string Chunk(Json delta, bool answer = false) {
    Json logprobs = nullptr;
    if (ctx_.logprobs && answer) logprobs = ChatLogprobs(logprobs_.Take());
    Json choice{{"index", 0},
                {"delta", std::move(delta)},
                {"logprobs", std::move(logprobs)},
                {"finish_reason", nullptr}};
    return SseData(ChunkJson(ctx_, "chat.completion.chunk", std::move(choice)));
  }
  ResponseContext ctx_;
  LogprobQueue logprobs_;
};

class CompletionStream : public StreamEncoder {
 public:
  explicit CompletionStream(const ResponseContext& ctx) : ctx_(ctx) {}
  std::string Start(const CacheInfo&) override { return {}; }
  std::string Delta(const GenerationEvent& ev) override {
    if (ev.kind != GenerationEvent::Kind::kText) return {};
    Add(ev.logprobs);
    if (ev.text.empty()) return {};
    std::string out = SseData(ChunkJson(
        ctx_, "text_completion",
        {{"text", ev.text}, {"index", 0}, {"logprobs", Logprobs()}, {"finish_reason", nullptr}}));
    return out;
  }
  std::string Finish(const GenerationResult& r) override {
    for (size_t i = received_; i < r.logprobs.size(); ++i) pending_.push_back(r.logprobs[i]);
    received_ = r.logprobs.size();
    std::string out = SseData(ChunkJson(ctx_, "text_completion",
                                        {{"text", ""},
                                         {"index", 0},
                                         {"logprobs", Logprobs()},
                                         {"finish_reason", OpenAiFinishReason(r.finish)}}));
    if (ctx_.include_usage) {
      out += SseData(Json{{"id", ctx_.id},
                          {"object", "text_completion"},
                          {"created", ctx_.created},
                          {"model", ctx_.model},
                          {"choices", Json::array()},
                          {"usage", OpenAiUsage(r)}});
    }
    return out + SseDone();
  }
  std::string Error(const std::string& message) override {
    return SseEvent("error", Json{{"error", {{"message", message}, {"type", "server_error"}}}}) +
           SseDone();
  }

 private:
  void Add(const std::vector<TokenLogprob>& entries) {
    received_ += entries.size();
    pending_.insert(pending_.end(), entries.begin(), entries.end());
  }
  // The pending tokens' logprobs, their text offsets counted from the bytes already sent.
  Json Logprobs() {
    if (!ctx_.logprobs) return nullptr;
    Json out = CompletionLogprobs(pending_, offset_);
    for (const TokenLogprob& t : pending_) offset_ += t.token.size();
    pending_.clear();
    return out;
  }
  ResponseContext ctx_;
  size_t received_ = 0;
  size_t offset_ = 0;
  std::vector<TokenLogprob> pending_;
};

}  // namespace

const char* OpenAiFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
    default:
      return "error";
  }
}

Expected<ApiRequest> ParseChatCompletionsRequest(const Json& body) {
  ApiRequest req;
  req.dialect = Dialect::kChatCompletions;
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
    return InvalidArgument("'messages' must be a non-empty array");
  }
  bool has_turn = false;
  for (size_t i = 0; i < msgs->size(); ++i) {
    FLASHKV_ASSIGN_OR_RETURN(ChatMessage m, ParseMessage((*msgs)[i], i));
    has_turn |= m.role != ChatRole::kSystem;
    req.messages.push_back(std::move(m));
  }
  if (!has_turn) return InvalidArgument("'messages' has no user, assistant or tool message");
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> effort, OptString(body, "reasoning_effort"));
  FLASHKV_RETURN_IF_ERROR(ParseCommon(body, effort, &req));
  FLASHKV_RETURN_IF_ERROR(ParseTools(body, &req.tools));
  if (auto tc = body.find("tool_choice");
      tc != body.end() && !tc->is_null() && !tc->is_string() && !tc->is_object()) {
    return InvalidArgument("'tool_choice' must be a string or an object, not {}",
                           JsonTypeName(*tc));
  }
  if (ToolChoiceNone(body)) req.tools.clear();
  if (auto tc = body.find("tool_choice"); tc != body.end()) {
    if (*tc == "required") {
      FLASHKV_RETURN_IF_ERROR(ForceToolCall({}, "tool_choice", &req));
    } else if (tc->is_object() && tc->value("type", "") == "function") {
      auto fn = tc->find("function");
      if (fn != tc->end() && fn->is_object() && fn->contains("name") && (*fn)["name"].is_string()) {
        FLASHKV_RETURN_IF_ERROR(
            ForceToolCall({(*fn)["name"].get<std::string>()}, "tool_choice.function.name", &req));
      }
    }
    // A forced call does not think, so the client's sampling knobs apply.
    if (req.constraint) FLASHKV_RETURN_IF_ERROR(ParseSampling(body, &req));
  }
  if (auto rf = body.find("response_format"); rf != body.end()) {
    FLASHKV_RETURN_IF_ERROR(ParseStructuredOutput(&*rf, "response_format", &req));
    // Constrained requests do not think, so the client's sampling knobs apply.
    if (req.constraint) FLASHKV_RETURN_IF_ERROR(ParseSampling(body, &req));
  }
  FLASHKV_ASSIGN_OR_RETURN(std::optional<bool> logprobs, OptBool(body, "logprobs"));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<int64_t> top, OptInt(body, "top_logprobs", 0, 20));
  if (logprobs.value_or(false)) {
    req.logprobs = int(top.value_or(0));
  } else if (top.value_or(0) > 0) {
    return InvalidArgument("'top_logprobs' needs 'logprobs': true");
  }
  return req;
}

Expected<ApiRequest> ParseCompletionsRequest(const Json& body) {
  ApiRequest req;
  req.dialect = Dialect::kCompletions;
  auto p = body.find("prompt");
  if (p == body.end() || p->is_null()) return InvalidArgument("'prompt' is required");
  if (p->is_string()) {
    req.prompt = p->get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_string()) {
    req.prompt = (*p)[0].get<std::string>();  // the first prompt of a batch, as ds4 does
  } else {
    return InvalidArgument("'prompt' must be a string or a non-empty array of strings");
  }
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> effort, OptString(body, "reasoning_effort"));
  FLASHKV_RETURN_IF_ERROR(ParseCommon(body, effort, &req));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<int64_t> logprobs, OptInt(body, "logprobs", 0, 5));
  if (logprobs) req.logprobs = int(*logprobs);
  return req;
}

Json ChatCompletionResponse(const ResponseContext& ctx, const GenerationResult& r) {
  Json message{{"role", "assistant"}};
  const bool calls = !r.parsed.tool_calls.empty();
  message["content"] = calls && r.parsed.content.empty() ? Json(nullptr) : Json(r.parsed.content);
  if (!r.parsed.reasoning.empty()) message["reasoning_content"] = r.parsed.reasoning;
  if (calls) {
    Json arr = Json::array();
    for (size_t i = 0; i < r.parsed.tool_calls.size(); ++i) {
      arr.push_back({{"id", r.tool_call_ids[i]},
                     {"type", "function"},
                     {"function",
                      {{"name", r.parsed.tool_calls[i].name},
                       {"arguments", r.parsed.tool_calls[i].arguments}}}});
    }
    message["tool_calls"] = std::move(arr);
  }
  return Json{
      {"id", ctx.id},
      {"object", "chat.completion"},
      {"created", ctx.created},
      {"model", ctx.model},
      {"choices", Json::array({{{"index", 0},
                                {"message", std::move(message)},
                                {"logprobs", ctx.logprobs ? ChatLogprobs(AnswerLogprobs(r.logprobs))
                                                          : Json(nullptr)},
                                {"finish_reason", OpenAiFinishReason(r.finish)}}})},
      {"usage", OpenAiUsage(r)}};
}

Json CompletionResponse(const ResponseContext& ctx, const GenerationResult& r) {
  return Json{
      {"id", ctx.id},
      {"object", "text_completion"},
      {"created", ctx.created},
      {"model", ctx.model},
      {"choices",
       Json::array({{{"text", r.text},
                     {"index", 0},
                     {"logprobs", ctx.logprobs ? CompletionLogprobs(r.logprobs, 0) : Json(nullptr)},
                     {"finish_reason", OpenAiFinishReason(r.finish)}}})},
      {"usage", OpenAiUsage(r)}};
}

std::unique_ptr<StreamEncoder> NewChatCompletionsStream(const ResponseContext& ctx) {
  return std::make_unique<ChatStream>(ctx);
}

std::unique_ptr<StreamEncoder> NewCompletionsStream(const ResponseContext& ctx) {
  return std::make_unique<CompletionStream>(ctx);
}

}  // namespace flashkv
