#include "server/api_request.h"

#include "chat/tool_schema.h"

namespace flashkv {

Expected<ThinkingMode> ParseThinking(const Json& body, const std::optional<std::string>& effort,
                                     const std::string& model) {
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
  return mode.value_or(ThinkingMode::kHigh);
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
      auto t = part.find("text");
      if (t != part.end() && t->is_string()) text += t->get<std::string>();
    }
  }
  return text;
}

}  // namespace flashkv
