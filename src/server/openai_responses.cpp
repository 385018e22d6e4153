#include "server/openai_responses.h"

#include <utility>

#include "engine/tool_replay_map.h"
#include "server/logprobs_json.h"
#include "server/openai_responses_tools.h"
#include "server/sse.h"
#include "server/usage.h"

namespace flashkv {
namespace {

// Text of a message item's content: a string, null, or text-like parts. Other parts
// (images, files) cannot be rendered for this model, so they are refused, not dropped.
Expected<std::string> ItemText(const Json& content, const std::string& where) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    return InvalidArgument("'{}' must be a string or an array of parts", where);
  std::string out;
  for (const Json& p : content) {
    if (!p.is_object()) return InvalidArgument("'{}' parts must be objects", where);
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> type, OptString(p, "type"));
    const std::string t = type.value_or("");
    if (t != "input_text" && t != "output_text" && t != "text" && t != "summary_text" &&
        t != "reasoning_text") {
      return Unsupported(
          "'{}' part type \"{}\" is not supported: this server reads text parts "
          "only",
          where, t);
    }
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> text, OptString(p, "text"));
    out += text.value_or("");
  }
  return out;
}

Expected<std::string> OutputText(const Json& output, const std::string& where) {
  if (output.is_string()) return output.get<std::string>();
  if (output.is_array()) {
    std::string out;
    for (size_t i = 0; i < output.size(); ++i) {
      const Json& p = output[i];
      if (!p.is_object()) continue;
      // An image a tool returned (Codex's view_image) is refused, not dropped: the model
      // would answer as if it had seen it.
      auto type = p.find("type");
      if (type != p.end() && type->is_string() && *type != "input_text" && *type != "output_text" &&
          *type != "text") {
        return Unsupported("'{}[{}]' is an \"{}\" part: this server reads text parts only", where,
                           i, type->get<std::string>());
      }
      auto t = p.find("text");
      if (t != p.end() && t->is_string()) out += t->get<std::string>();
    }
    return out;
  }
  if (output.is_null()) return std::string();
  return InvalidArgument("'{}' must be a string or an array of parts", where);
}

// A JSON value as argument or result text: strings as they are, anything else dumped.
std::string ValueText(const Json& v) {
  return v.is_string() ? v.get<std::string>() : DumpJson(v);
}

// The hosted tool calls Codex may replay (docs/SERVER.md §5.4) and the tool name each is rendered
// as; nullptr for other types.
const char* HostedCallName(const std::string& type) {
  if (type == "local_shell_call") return "local_shell";
  if (type == "tool_search_call") return "tool_search";
  if (type == "web_search_call") return "web_search_call";
  if (type == "image_generation_call") return "image_generation_call";
  return nullptr;
}

bool IsHostedOutput(const std::string& type) {
  return type == "local_shell_call_output" || type == "web_search_call_output" ||
         type == "tool_search_output" || type == "tool_search_call_output" ||
         type == "image_generation_call_output";
}

// The id a call or its output is matched by: call_id, else the item id.
Expected<std::string> CallIdOf(const Json& item) {
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> call_id, OptString(item, "call_id"));
  if (call_id) return *call_id;
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> id, OptString(item, "id"));
  return id.value_or("");
}

// A call item (function, custom or hosted) as a ToolCall.
Expected<ToolCall> CallOf(const Json& item, const std::string& type, const std::string& where) {
  ToolCall call;
  FLASHKV_ASSIGN_OR_RETURN(call.id, CallIdOf(item));
  if (const char* hosted = HostedCallName(type)) {
    call.name = hosted;
    call.arguments = "{}";
    for (const char* key : {"action", "arguments", "input"}) {
      auto it = item.find(key);
      if (it != item.end() && !it->is_null()) {
        call.arguments = ValueText(*it);
        break;
      }
    }
    return call;
  }
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> name, OptString(item, "name"));
  if (!name || name->empty()) return InvalidArgument("'{}.name' is required", where);
  call.name = *name;
  if (type == "function_call") {
    // Namespaced tools are flattened in the prompt, so their calls are too.
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> ns, OptString(item, "namespace"));
    if (ns) call.name = *ns + *name;
    auto args = item.find("arguments");
    call.arguments = args == item.end() || args->is_null() ? "{}" : ValueText(*args);
  } else {
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> in, OptString(item, "input"));
    call.arguments = DumpJson(Json{{"input", in.value_or("")}});
  }
  return call;
}

// A tool-output item's text: `output` (string or parts), else `result`, else the `tools`
// a tool_search_output carries.
Expected<std::string> ResultOf(const Json& item, const std::string& where) {
  if (auto out = item.find("output"); out != item.end() && !out->is_null()) {
    if (out->is_string() || out->is_array()) return OutputText(*out, where + ".output");
    return DumpJson(*out);
  }
  if (auto res = item.find("result"); res != item.end() && !res->is_null()) return ValueText(*res);
  if (auto tools = item.find("tools"); tools != item.end() && !tools->is_null())
    return DumpJson(*tools);
  return std::string();
}

// `loaded`: tools that tool_search_output items bring in (their schemas join the prompt).
Status ParseInput(const Json& input, ApiRequest* req, ResponsesTools* loaded) {
  if (input.is_string()) {
    req->messages.push_back(ChatMessage{ChatRole::kUser, input.get<std::string>(), {}, {}, {}, {}});
    return Status::Ok();
  }
  if (!input.is_array() || input.empty())
    return InvalidArgument("'input' must be a string or a non-empty array");
  std::string pending_reasoning;  // a reasoning item belongs to the next assistant turn
  // A reasoning item that no message or call of its turn follows (a reply cut inside its
  // thinking returns only that item, and Codex replays it) is an assistant turn itself.
  auto reasoning_turn = [&] {
    if (pending_reasoning.empty()) return;
    ChatMessage m;
    m.role = ChatRole::kAssistant;
    m.reasoning = std::exchange(pending_reasoning, {});
    req->messages.push_back(std::move(m));
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object())
      return InvalidArgument("'{}' must be an object, not {}", where, JsonTypeName(item));
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> type_opt, OptString(item, "type"));
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> status, OptString(item, "status"));
    // Clients replay the items a response returned as they got them, and a reply cut by
    // max_output_tokens comes back "incomplete" (Codex resumes such sessions); its text is
    // what the model wrote, so it renders like any other turn.
    if (status && *status != "completed" && *status != "incomplete") {
      return InvalidArgument(
          "'{}.status' \"{}\" is not supported (only completed or incomplete items)", where,
          *status);
    }
    const std::string type = type_opt.value_or("message");
    const bool is_call =
        type == "function_call" || type == "custom_tool_call" || HostedCallName(type) != nullptr;
    if (type == "message") {
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> role, OptString(item, "role"));
      ChatMessage m;
      const std::string r = role.value_or("user");
      if (r == "user") {
        m.role = ChatRole::kUser;
      } else if (r == "assistant") {
        m.role = ChatRole::kAssistant;
        m.reasoning = std::exchange(pending_reasoning, {});
      } else if (r == "system" || r == "developer") {
        m.role = ChatRole::kSystem;
      } else {
        return InvalidArgument("'{}.role' \"{}\" is not supported", where, r);
      }
      if (m.role != ChatRole::kAssistant) reasoning_turn();
      auto c = item.find("content");
      if (c != item.end()) {
        FLASHKV_ASSIGN_OR_RETURN(m.content, ItemText(*c, where + ".content"));
      }
      req->messages.push_back(std::move(m));
    } else if (is_call) {
      FLASHKV_ASSIGN_OR_RETURN(ToolCall call, CallOf(item, type, where));
      // Responses splits one assistant turn into a message item and call items; they join
      // again (the model wrote the text and the DSML block as one turn, and the session's
      // visible key renders them so).
      if (req->messages.empty() || req->messages.back().role != ChatRole::kAssistant) {
        ChatMessage m;
        m.role = ChatRole::kAssistant;
        m.reasoning = std::exchange(pending_reasoning, {});
        req->messages.push_back(std::move(m));
      } else if (req->messages.back().reasoning.empty()) {
        req->messages.back().reasoning = std::exchange(pending_reasoning, {});
      }
      req->messages.back().tool_calls.push_back(std::move(call));
    } else if (type == "function_call_output" || type == "custom_tool_call_output" ||
               IsHostedOutput(type)) {
      reasoning_turn();
      ChatMessage m;
      m.role = ChatRole::kTool;
      FLASHKV_ASSIGN_OR_RETURN(m.tool_call_id, CallIdOf(item));
      FLASHKV_ASSIGN_OR_RETURN(m.content, ResultOf(item, where));
      if (type == "tool_search_output") {
        if (auto tools = item.find("tools"); tools != item.end()) {
          FLASHKV_RETURN_IF_ERROR(ParseResponsesTools(*tools, where + ".tools", loaded));
        }
      }
      req->messages.push_back(std::move(m));
    } else if (type == "reasoning") {
      for (const char* key : {"summary", "content"}) {
        auto parts = item.find(key);
        if (parts == item.end() || !parts->is_array()) continue;
        for (const Json& p : *parts) {
          if (!p.is_object()) continue;
          auto t = p.find("text");
          if (t != p.end() && t->is_string()) pending_reasoning += t->get<std::string>();
        }
      }
    } else if (type == "compaction" || type == "context_compaction") {
      // Opaque to this server; the visible history is what gets rendered.
    } else {
      return InvalidArgument("'{}.type' \"{}\" is not supported", where, type);
    }
  }
  reasoning_turn();
  return Status::Ok();
}

// Every tool output must answer a call earlier in the input: this server keeps no
// Responses state between requests, so a call only the server would remember cannot be
// rendered (docs/SERVER.md §5.4).
Status CheckToolOutputsHaveCalls(const std::vector<ChatMessage>& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != ChatRole::kTool || m.tool_call_id.empty()) continue;
    bool found = false;
    for (size_t j = 0; j < i && !found; ++j) {
      for (const ToolCall& c : messages[j].tool_calls) found |= c.id == m.tool_call_id;
    }
    if (!found) {
      return InvalidArgument(
          "Responses continuation state is not available for call_id {}; retry by replaying "
          "the full input history",
          m.tool_call_id);
    }
  }
  return Status::Ok();
}

// Item ids and the output array, shared by the body and the stream so both agree.
struct OutputIds {
  std::string reasoning = NewRandomId("rs_");
  std::string message = NewRandomId("msg_");
  std::vector<std::string> calls;  // "fc_…" per call
};

const char* StatusOf(FinishReason f) {
  switch (f) {
    case FinishReason::kLength:
      return "incomplete";
    case FinishReason::kError:
    case FinishReason::kCancelled:
      return "failed";
    default:
      return "completed";
  }
}

// A reasoning item is complete only once </think> closed it.
const char* ReasoningStatus(const GenerationResult& r) {
  return r.text.find("</think>") != std::string::npos ? "completed" : "incomplete";
}

Json ReasoningItem(const std::string& id, const std::string& text, const char* status) {
  return {{"id", id},
          {"type", "reasoning"},
          {"status", status},
          {"summary", Json::array({{{"type", "summary_text"}, {"text", text}}})}};
}

Json MessageItem(const std::string& id, const std::string& text, const char* status) {
  return {
      {"id", id},
      {"type", "message"},
      {"status", status},
      {"role", "assistant"},
      {"content",
       Json::array({{{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}}})}};
}

// A call as an output item: the wire name and namespace restored for flattened tools,
// tool_search calls as tool_search_call items with object arguments (docs/SERVER.md §5.6).
// `with_arguments` false: the in_progress shape ("" or {} arguments).
Json CallItem(const ResponseContext& ctx, const std::string& id, const std::string& call_id,
              const ParsedToolCall& c, const char* status, bool with_arguments = true) {
  const ToolWireName* wire = FindToolWireName(ctx.tool_names, c.name);
  if (wire != nullptr && wire->tool_search) {
    Json args = Json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
    if (!with_arguments || !args.is_object()) args = Json::object();
    return {{"id", id},           {"type", "tool_search_call"}, {"status", status},
            {"call_id", call_id}, {"execution", "client"},      {"arguments", std::move(args)}};
  }
  Json item{{"id", id}, {"type", "function_call"}, {"status", status}};
  item["name"] = wire != nullptr ? wire->name : c.name;
  if (wire != nullptr && !wire->name_space.empty()) item["namespace"] = wire->name_space;
  item["call_id"] = call_id;
  item["arguments"] = with_arguments ? c.arguments : "";
  return item;
}

bool IsToolSearchCall(const ResponseContext& ctx, const ParsedToolCall& c) {
  const ToolWireName* wire = FindToolWireName(ctx.tool_names, c.name);
  return wire != nullptr && wire->tool_search;
}

// The whole response object. `reasoning`/`content`: the texts to report (as streamed).
Json ResponseObject(const ResponseContext& ctx, const GenerationResult* r, OutputIds* ids,
                    const std::string& reasoning, const std::string& content) {
  Json resp{{"id", ctx.id},
            {"object", "response"},
            {"created_at", ctx.created},
            {"status", "in_progress"},
            {"model", ctx.model},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"output", Json::array()},
            {"parallel_tool_calls", true},
            {"tool_choice", "auto"},
            {"tools", Json::array()}};
  if (r == nullptr) return resp;
  const char* status = StatusOf(r->finish);
  resp["status"] = status;
  if (r->finish == FinishReason::kLength)
    resp["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (r->finish == FinishReason::kError || r->finish == FinishReason::kCancelled) {
    resp["error"] = {{"code", "server_error"},
                     {"message", r->error.empty() ? "generation failed" : r->error}};
  }
  Json& out = resp["output"];
  if (ctx.reasoning_summary && !reasoning.empty())
    out.push_back(ReasoningItem(ids->reasoning, reasoning, ReasoningStatus(*r)));
  // No message item for a reply without text (stopped inside its thinking, or only
  // calls): Codex would replay an empty output_text message.
  if (!content.empty()) {
    out.push_back(MessageItem(ids->message, content, status));
    if (ctx.logprobs) {
      out.back()["content"][0]["logprobs"] = LogprobEntries(AnswerLogprobs(r->logprobs));
    }
  }
  while (ids->calls.size() < r->parsed.tool_calls.size()) ids->calls.push_back(NewRandomId("fc_"));
  for (size_t i = 0; i < r->parsed.tool_calls.size(); ++i) {
    out.push_back(
        CallItem(ctx, ids->calls[i], r->tool_call_ids[i], r->parsed.tool_calls[i], status));
  }
  resp["usage"] = ResponsesUsage(*r);
  return resp;
}

class ResponsesStream : public StreamEncoder {
 public:
  explicit ResponsesStream(const ResponseContext& ctx) : ctx_(ctx) {}

  std::string Start(const CacheInfo&) override {
    Json resp = ResponseObject(ctx_, nullptr, &ids_, {}, {});
    // Two statements: the operands of + are evaluated in no fixed order, and each Event
    // takes the next sequence number.
    std::string out = Event("response.created", {{"response", resp}});
    return out + Event("response.in_progress", {{"response", resp}});
  }

  std::string Delta(const GenerationEvent& ev) override {
    if (ev.kind != GenerationEvent::Kind::kChat) return {};
    for (const TokenLogprob& t : ev.logprobs) {
      if (!t.reasoning) answer_logprobs_.push_back(t);
    }
    const ChatEvent& c = ev.chat;
    std::string out;
    if (c.kind == ChatEvent::Kind::kReasoning && ctx_.reasoning_summary && !c.text.empty()) {
      if (reasoning_index_ < 0) {
        reasoning_index_ = next_index_++;
        out += Event("response.output_item.added", {{"output_index", reasoning_index_},
                                                    {"item",
                                                     {{"id", ids_.reasoning},
                                                      {"type", "reasoning"},
                                                      {"status", "in_progress"},
                                                      {"summary", Json::array()}}}});
        out += Event("response.reasoning_summary_part.added",
                     {{"item_id", ids_.reasoning},
                      {"output_index", reasoning_index_},
                      {"summary_index", 0},
                      {"part", {{"type", "summary_text"}, {"text", ""}}}});
      }
      reasoning_ += c.text;
      out += Event("response.reasoning_summary_text.delta", {{"item_id", ids_.reasoning},
                                                             {"output_index", reasoning_index_},
                                                             {"summary_index", 0},
                                                             {"delta", c.text}});
    } else if (c.kind == ChatEvent::Kind::kContent && !c.text.empty()) {
      out += CloseReasoning("completed");  // content follows </think>
      OpenMessage(&out);
      content_ += c.text;
      Json delta{{"item_id", ids_.message},
                 {"output_index", message_index_},
                 {"content_index", 0},
                 {"delta", c.text}};
      if (ctx_.logprobs) {
        delta["logprobs"] = LogprobEntries(std::exchange(answer_logprobs_, {}));
      }
      out += Event("response.output_text.delta", std::move(delta));
    }
    return out;
  }

  std::string Finish(const GenerationResult& r) override {
    const char* status = StatusOf(r.finish);
    std::string out = CloseReasoning(ReasoningStatus(r));
    if (message_index_ >= 0) {
      out += Event("response.output_text.done", {{"item_id", ids_.message},
                                                 {"output_index", message_index_},
                                                 {"content_index", 0},
                                                 {"text", content_}});
      out +=
          Event("response.content_part.done",
                {{"item_id", ids_.message},
                 {"output_index", message_index_},
                 {"content_index", 0},
                 {"part",
                  {{"type", "output_text"}, {"text", content_}, {"annotations", Json::array()}}}});
      out += Event("response.output_item.done",
                   {{"output_index", message_index_},
                    {"item", MessageItem(ids_.message, content_, status)}});
    }
    // Codex reads calls from output_item.done, so arguments go out whole, once.
    while (ids_.calls.size() < r.parsed.tool_calls.size()) ids_.calls.push_back(NewRandomId("fc_"));
    for (size_t i = 0; i < r.parsed.tool_calls.size(); ++i) {
      const int index = next_index_++;
      const ParsedToolCall& c = r.parsed.tool_calls[i];
      out += Event(
          "response.output_item.added",
          {{"output_index", index},
           {"item", CallItem(ctx_, ids_.calls[i], r.tool_call_ids[i], c, "in_progress", false)}});
      // tool_search_call items carry their arguments as an object, not as a string stream.
      if (!IsToolSearchCall(ctx_, c)) {
        out += Event("response.function_call_arguments.delta",
                     {{"item_id", ids_.calls[i]}, {"output_index", index}, {"delta", c.arguments}});
        out += Event(
            "response.function_call_arguments.done",
            {{"item_id", ids_.calls[i]}, {"output_index", index}, {"arguments", c.arguments}});
      }
      out += Event("response.output_item.done",
                   {{"output_index", index},
                    {"item", CallItem(ctx_, ids_.calls[i], r.tool_call_ids[i], c, status)}});
    }
    Json resp = ResponseObject(ctx_, &r, &ids_, reasoning_, content_);
    const std::string final_status = resp["status"].get<std::string>();
    const std::string name = final_status == "completed"    ? "response.completed"
                             : final_status == "incomplete" ? "response.incomplete"
                                                            : "response.failed";
    out += Event(name, {{"response", std::move(resp)}});
    return out;
  }

  std::string Error(const std::string& message) override {
    GenerationResult failed;
    failed.finish = FinishReason::kError;
    failed.error = message;
    Json resp = ResponseObject(ctx_, &failed, &ids_, reasoning_, content_);
    std::string out =
        Event("error", {{"code", "server_error"}, {"message", message}, {"param", nullptr}});
    return out + Event("response.failed", {{"response", std::move(resp)}});
  }

 private:
  // Each event carries its type and a sequence number right after it.
  std::string Event(const std::string& type, Json fields) {
    Json ev{{"type", type}, {"sequence_number", seq_++}};
    for (auto& [k, v] : fields.items()) ev[k] = std::move(v);
    return SseEvent(type, ev);
  }
  void OpenMessage(std::string* out) {
    if (message_index_ >= 0) return;
    message_index_ = next_index_++;
    Json item{{"id", ids_.message},
              {"type", "message"},
              {"status", "in_progress"},
              {"role", "assistant"},
              {"content", Json::array()}};
    *out += Event("response.output_item.added",
                  {{"output_index", message_index_}, {"item", std::move(item)}});
    *out +=
        Event("response.content_part.added",
              {{"item_id", ids_.message},
               {"output_index", message_index_},
               {"content_index", 0},
               {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}});
  }
  std::string CloseReasoning(const char* status) {
    if (reasoning_index_ < 0 || reasoning_closed_) return {};
    reasoning_closed_ = true;
    std::string out;
    out += Event("response.reasoning_summary_text.done", {{"item_id", ids_.reasoning},
                                                          {"output_index", reasoning_index_},
                                                          {"summary_index", 0},
                                                          {"text", reasoning_}});
    out += Event("response.reasoning_summary_part.done",
                 {{"item_id", ids_.reasoning},
                  {"output_index", reasoning_index_},
                  {"summary_index", 0},
                  {"part", {{"type", "summary_text"}, {"text", reasoning_}}}});
    out += Event("response.output_item.done",
                 {{"output_index", reasoning_index_},
                  {"item", ReasoningItem(ids_.reasoning, reasoning_, status)}});
    return out;
  }

  ResponseContext ctx_;
  OutputIds ids_;
  int64_t seq_ = 0;
  int next_index_ = 0;
  int reasoning_index_ = -1;
  bool reasoning_closed_ = false;
  int message_index_ = -1;
  std::string reasoning_;
  std::string content_;
  std::vector<TokenLogprob> answer_logprobs_;  // received, not sent with a delta yet
};

}  // namespace

Expected<ApiRequest> ParseResponsesRequest(const Json& body) {
  ApiRequest req;
  req.dialect = Dialect::kResponses;
  for (const char* key : {"previous_response_id", "conversation"}) {
    auto it = body.find(key);
    if (it != body.end() && !it->is_null()) {
      return InvalidArgument("{} is not supported; replay full input instead", key);
    }
  }
  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> instructions,
                           OptString(body, "instructions"));
  if (instructions && !instructions->empty()) {
    req.messages.push_back(ChatMessage{ChatRole::kSystem, *instructions, {}, {}, {}, {}});
  }
  auto input = body.find("input");
  if (input == body.end() || input->is_null()) return InvalidArgument("'input' is required");
  ResponsesTools loaded;
  FLASHKV_RETURN_IF_ERROR(ParseInput(*input, &req, &loaded));
  FLASHKV_RETURN_IF_ERROR(CheckToolOutputsHaveCalls(req.messages));
  bool has_turn = false;
  for (const ChatMessage& m : req.messages) has_turn |= m.role != ChatRole::kSystem;
  if (!has_turn) return InvalidArgument("'input' has no user, assistant or tool item");

  FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> model, OptString(body, "model"));
  req.model = model.value_or("");
  std::optional<std::string> effort;
  if (auto r = body.find("reasoning"); r != body.end() && !r->is_null()) {
    if (!r->is_object()) return InvalidArgument("'reasoning' must be an object");
    FLASHKV_ASSIGN_OR_RETURN(effort, OptString(*r, "effort"));
    FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> summary, OptString(*r, "summary"));
    req.reasoning_summary = summary == "auto" || summary == "concise" || summary == "detailed";
  }
  FLASHKV_ASSIGN_OR_RETURN(req.thinking, ParseThinking(body, effort, req.model));
  // top_k, min_p, seed and stop are not Responses fields; they are ignored (docs/SERVER.md §5.4).
  FLASHKV_RETURN_IF_ERROR(ParseSampling(OnlyKeys(body, {"temperature", "top_p"}), &req));
  FLASHKV_ASSIGN_OR_RETURN(req.max_tokens,
                           ParseMaxTokens(body, {"max_output_tokens", "max_tokens"}));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<bool> stream, OptBool(body, "stream"));
  req.stream = stream.value_or(false);
  // The request's tools first, then those tool_search outputs loaded, in input order.
  ResponsesTools tools;
  if (auto t = body.find("tools"); t != body.end()) {
    FLASHKV_RETURN_IF_ERROR(ParseResponsesTools(*t, "tools", &tools));
  }
  for (Json& schema : loaded.schemas) tools.schemas.push_back(std::move(schema));
  for (ToolWireName& name : loaded.names) tools.names.push_back(std::move(name));
  req.tools = std::move(tools.schemas);
  req.tool_names = std::move(tools.names);
  // Logprobs as OpenAI gives them: with include "message.output_text.logprobs"; a
  // top_logprobs above 0 asks for them too.
  FLASHKV_ASSIGN_OR_RETURN(std::optional<int64_t> top, OptInt(body, "top_logprobs", 0, 20));
  bool included = false;
  if (auto inc = body.find("include"); inc != body.end() && inc->is_array()) {
    for (const Json& v : *inc) included |= v == "message.output_text.logprobs";
  }
  if (included || top.value_or(0) > 0) req.logprobs = int(top.value_or(0));
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (tc->is_object()) {
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> type, OptString(*tc, "type"));
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> name, OptString(*tc, "name"));
      if (type != "function" || !name) {
        return Unsupported(
            "'tool_choice' {{\"type\":\"{}\"}} is not supported; use \"auto\", "
            "\"none\", \"required\" or {{\"type\":\"function\",\"name\":…}}",
            type.value_or(""));
      }
      FLASHKV_RETURN_IF_ERROR(ForceToolCall({*name}, "tool_choice.name", &req));
    } else if (!tc->is_string()) {
      return InvalidArgument("'tool_choice' must be a string");
    } else if (*tc == "none") {
      req.tools.clear();
    } else if (*tc == "required") {
      FLASHKV_RETURN_IF_ERROR(ForceToolCall({}, "tool_choice", &req));
    } else if (*tc != "auto") {
      return InvalidArgument("'tool_choice' \"{}\" is not one of auto, none, required",
                             tc->get<std::string>());
    }
    // A forced call does not think, so the client's sampling knobs apply.
    if (req.constraint) {
      FLASHKV_RETURN_IF_ERROR(ParseSampling(OnlyKeys(body, {"temperature", "top_p"}), &req));
    }
  }
  if (auto text = body.find("text"); text != body.end() && text->is_object()) {
    if (auto format = text->find("format"); format != text->end()) {
      FLASHKV_RETURN_IF_ERROR(ParseStructuredOutput(&*format, "text.format", &req));
      // Constrained requests do not think, so the client's sampling knobs apply.
      if (req.constraint) {
        FLASHKV_RETURN_IF_ERROR(ParseSampling(OnlyKeys(body, {"temperature", "top_p"}), &req));
      }
    }
  }
  return req;
}

Json ResponsesResponse(const ResponseContext& ctx, const GenerationResult& r) {
  OutputIds ids;
  return ResponseObject(ctx, &r, &ids, r.parsed.reasoning, r.parsed.content);
}

std::unique_ptr<StreamEncoder> NewResponsesStream(const ResponseContext& ctx) {
  return std::make_unique<ResponsesStream>(ctx);
}

}  // namespace flashkv
