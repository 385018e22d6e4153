#include "server/api_request.h"

#include <algorithm>

#include "chat/dsml.h"
#include "chat/tool_schema.h"

namespace flashkv {

Expected<ThinkingMode> ParseThinking(const Json& body, const std::optional<std::string>& effort,
                                     const std::string& model, ThinkingMode fallback) {
  std::optional<ThinkingMode> mode;
  if (auto it = body.find("thinking"); it != body.end() && !it->is_null()) {
    if (it->is_boolean()) {
      mode = it->get<bool>() ? ThinkingMode::kHigh : ThinkingMode::kNone;
    } else if (it->is_object()) {
      FLASHKV_ASSIGN_OR_RETURN(std::optional<std::string> type, OptString(*it, "type"));
      if (type == "disabled") {
        mode = ThinkingMode::kNone;
      } else if (type == "enabled" || type == "adaptive") {
        mode = ThinkingMode::kHigh;
      } else if (type) {
        return InvalidArgument("'thinking.type' must be \"enabled\" or \"disabled\", not \"{}\"",
                               *type);
      }
    } else {
      return InvalidArgument("'thinking' must be a boolean or an object, not {}",
                             JsonTypeName(*it));
    }
  }
  FLASHKV_ASSIGN_OR_RETURN(std::optional<bool> think, OptBool(body, "think"));
  if (think) mode = *think ? ThinkingMode::kHigh : ThinkingMode::kNone;
  if (effort) {
    if (*effort == "none") {
      mode = ThinkingMode::kNone;
    } else if (*effort == "max") {
      mode = ThinkingMode::kMax;
    } else if (*effort == "minimal" || *effort == "low" || *effort == "medium" ||
               *effort == "high" || *effort == "xhigh") {
      // An effort level turns thinking on unless it was explicitly disabled.
      if (mode != ThinkingMode::kNone) mode = ThinkingMode::kHigh;
    } else {
      return InvalidArgument(
          "reasoning effort must be one of none, minimal, low, medium, high, xhigh, max; not "
          "\"{}\"",
          *effort);
    }
  }
  if (model == "deepseek-reasoner")
    return mode == ThinkingMode::kMax ? ThinkingMode::kMax : ThinkingMode::kHigh;
  if (!mode && model == "deepseek-chat") return ThinkingMode::kNone;
  return mode.value_or(fallback);
}

Status ParseSampling(const Json& body, ApiRequest* out) {
  SamplerOptions s;
  s.temperature = 1.0f;
  s.top_p = 1.0f;
  s.min_p = 0.05f;
  s.top_k = 0;
  FLASHKV_ASSIGN_OR_RETURN(std::optional<double> temperature, OptNumber(body, "temperature"));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<double> top_p, OptNumber(body, "top_p"));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<double> min_p, OptNumber(body, "min_p"));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, OptInt(body, "top_k", -1, 1 << 30));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<int64_t> seed,
                           OptInt(body, "seed", INT64_MIN / 2, INT64_MAX / 2));
  if (temperature && (*temperature < 0 || *temperature > 2)) {
    return InvalidArgument("'temperature' must be between 0 and 2, not {}", *temperature);
  }
  if (top_p && (*top_p < 0 || *top_p > 1))
    return InvalidArgument("'top_p' must be between 0 and 1, not {}", *top_p);
  if (min_p && (*min_p < 0 || *min_p > 1))
    return InvalidArgument("'min_p' must be between 0 and 1, not {}", *min_p);
  if (out->thinking == ThinkingMode::kNone) {
    if (temperature) s.temperature = float(*temperature);
    if (top_p) s.top_p = float(*top_p);
    if (min_p) s.min_p = float(*min_p);
    // A top_k above 1024 cannot change the pick in practice; capping bounds the sort.
    if (top_k && *top_k > 0) s.top_k = int(std::min<int64_t>(*top_k, 1024));
  } else if (temperature && *temperature == 0) {
    // Greedy is the one knob thinking mode honours: without it two temperature-0 runs of
    // the same prompt drew different text (issue 32).
    s.temperature = 0.0f;
  }
  if (seed && *seed != 0) {
    s.seed = uint64_t(*seed);
    out->seeded = true;
  }
  out->sampling = s;
  return Status::Ok();
}

Json OnlyKeys(const Json& body, std::initializer_list<std::string_view> keys) {
  Json out = Json::object();
  for (std::string_view key : keys) {
    auto it = body.find(key);
    if (it != body.end()) out[std::string(key)] = *it;
  }
  return out;
}

Status ParseStop(const Json& body, std::string_view key, std::vector<std::string>* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return Status::Ok();
  constexpr size_t kMaxStops = 16;
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) out->push_back(it->get<std::string>());
    return Status::Ok();
  }
  if (!it->is_array()) return InvalidArgument("'{}' must be a string or an array of strings", key);
  if (it->size() > kMaxStops)
    return InvalidArgument("'{}' has more than {} entries", key, kMaxStops);
  for (const Json& s : *it) {
    if (!s.is_string())
      return InvalidArgument("'{}' entries must be strings, not {}", key, JsonTypeName(s));
    if (!s.get<std::string>().empty()) out->push_back(s.get<std::string>());
  }
  return Status::Ok();
}

Status ParseTools(const Json& body, std::vector<Json>* out) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_array())
    return InvalidArgument("'tools' must be an array, not {}", JsonTypeName(*it));
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& t = (*it)[i];
    if (!t.is_object())
      return InvalidArgument("'tools[{}]' must be an object, not {}", i, JsonTypeName(t));
    out->push_back(NormalizeToolSchema(t));
  }
  return Status::Ok();
}

Expected<std::optional<int64_t>> ParseMaxTokens(const Json& body,
                                                std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) {
    FLASHKV_ASSIGN_OR_RETURN(std::optional<int64_t> v,
                             OptInt(body, key, 1, (int64_t(1) << 31) - 1));
    if (v) return v;
  }
  return std::optional<int64_t>();
}

Status ParseStructuredOutput(const Json* format, std::string_view where, ApiRequest* req) {
  if (format == nullptr || !format->is_object()) return Status::Ok();
  auto type_it = format->find("type");
  if (type_it == format->end() || type_it->is_null()) return Status::Ok();
  if (!type_it->is_string()) return InvalidArgument("'{}.type' must be a string", where);
  const std::string type = type_it->get<std::string>();
  if (type == "text") return Status::Ok();
  std::string ask;
  if (type == "json_object") {
    req->constraint = AnyJsonObjectGrammar();
    ask = "Reply with one JSON object only: no prose, no code fence.";
  } else if (type == "json_schema") {
    const Json* schema = nullptr;
    std::string at = std::string(where) + ".schema";
    if (auto js = format->find("json_schema"); js != format->end() && js->is_object()) {
      if (auto sc = js->find("schema"); sc != js->end()) schema = &*sc;
      at = std::string(where) + ".json_schema.schema";
    } else if (auto sc = format->find("schema"); sc != format->end()) {
      schema = &*sc;
    }
    if (schema == nullptr || schema->is_null()) {
      req->constraint = AnyJsonObjectGrammar();
      ask = "Reply with one JSON object only: no prose, no code fence.";
    } else {
      Expected<std::shared_ptr<const JsonGrammar>> g = CompileJsonSchema(*schema);
      if (!g.ok()) {
        return Status(g.status().code(), "'" + at + "': " + g.status().message());
      }
      req->constraint = *g;
      ask =
          "Reply with one JSON value only: no prose, no code fence. It must match this JSON "
          "Schema:\n" +
          DumpJson(*schema);
    }
  } else {
    return Status::Ok();  // the request schema names the allowed types
  }
  if (!req->tools.empty()) {
    return Unsupported(
        "'{}' with 'tools' is not supported: the answer is either JSON or a tool "
        "call; drop one (or send tool_choice \"none\")",
        where);
  }
  req->thinking = ThinkingMode::kNone;
  // The model cannot see the mask: the system prompt says what it must write.
  if (!req->messages.empty() && req->messages.front().role == ChatRole::kSystem) {
    req->messages.front().content += "\n\n" + ask;
  } else {
    ChatMessage system;
    system.role = ChatRole::kSystem;
    system.content = ask;
    req->messages.insert(req->messages.begin(), std::move(system));
  }
  return Status::Ok();
}

Status ForceToolCall(std::vector<std::string> names, std::string_view where, ApiRequest* req) {
  if (req->tools.empty())
    return InvalidArgument("'{}' forces a tool call but 'tools' is empty", where);
  std::vector<std::string> prompt_names;
  for (const Json& t : req->tools) {
    auto n = t.find("name");
    if (n != t.end() && n->is_string()) prompt_names.push_back(n->get<std::string>());
  }
  if (names.empty()) {
    names = prompt_names;
  } else {
    for (std::string& name : names) {
      // Responses tools in a namespace are called by their flattened prompt name.
      for (const ToolWireName& w : req->tool_names) {
        if (w.name == name) name = w.prompt_name;
      }
      if (std::find(prompt_names.begin(), prompt_names.end(), name) == prompt_names.end()) {
        return InvalidArgument("'{}' names \"{}\", which is not in 'tools'", where, name);
      }
    }
  }
  // The opening RenderDsmlToolCalls writes, up to the end of the invoke tag.
  std::vector<std::string> openings;
  for (const std::string& name : names) {
    openings.push_back("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"" +
                       EscapeDsmlAttribute(name) + "\">\n");
  }
  Expected<std::shared_ptr<const JsonGrammar>> g = OneOfTextsGrammar(std::move(openings));
  if (!g.ok())
    return Status(g.status().code(), "'" + std::string(where) + "': " + g.status().message());
  req->constraint = *g;
  req->constraint_prefix = true;
  req->thinking = ThinkingMode::kNone;
  return Status::Ok();
}

bool ReplaysReasoning(const ApiRequest& req) {
  bool answered = false;
  for (const ChatMessage& m : req.messages) {
    if (m.role != ChatRole::kAssistant) continue;
    if (!m.reasoning.empty()) return true;
    answered = true;
  }
  if (answered) return false;
  return req.dialect != Dialect::kResponses || req.reasoning_summary;
}

Expected<std::string> ContentText(const Json& content, std::string_view where) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return InvalidArgument("{} must be a string, an array or null, not {}", where,
                           JsonTypeName(content));
  }
  std::string text;
  for (const Json& part : content) {
    if (part.is_string()) {
      text += part.get<std::string>();
    } else if (part.is_object()) {
      // Parts that are not text were refused by the request schema; an assistant's
      // `refusal` part is its text.
      auto t = part.find("text");
      if (t == part.end()) t = part.find("refusal");
      if (t != part.end() && t->is_string()) text += t->get<std::string>();
    }
  }
  return text;
}

}  // namespace flashkv
