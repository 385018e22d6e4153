#include "tools/vector_runner.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "chat/prompt_renderer.h"

namespace flashkv {
namespace {

Expected<ChatRole> ParseRole(const std::string& role) {
  if (role == "system" || role == "developer") return ChatRole::kSystem;
  if (role == "user") return ChatRole::kUser;
  if (role == "assistant") return ChatRole::kAssistant;
  if (role == "tool") return ChatRole::kTool;
  return InvalidArgument("unknown message role '{}'", role);
}

ThinkingMode ThinkingOf(const nlohmann::json& request) {
  if (request.contains("thinking") && request["thinking"].is_object()) {
    const auto& t = request["thinking"];
    if (t.value("type", std::string()) == "disabled") return ThinkingMode::kNone;
    return ThinkingMode::kHigh;
  }
  // DeepSeek's API thinks by default.
  return ThinkingMode::kHigh;
}

// Maps token bytes to the id decoding to exactly those bytes (the API reports bytes).
class BytesIndex {
 public:
  explicit BytesIndex(const Tokenizer& tok) {
    for (size_t id = 0; id < tok.vocab_size(); ++id) {
      std::string_view b = tok.TokenBytes(static_cast<int32_t>(id));
      if (!b.empty()) ids_.emplace(std::string(b), static_cast<int32_t>(id));
    }
  }
  int32_t Find(const std::string& bytes) const {
    auto it = ids_.find(bytes);
    return it == ids_.end() ? -1 : it->second;
  }

 private:
  // First id wins: specials and ordinary tokens with equal bytes are rare and the
  // official API reports the ordinary one.
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace

void LogSoftmax(const float* logits, int n, std::vector<double>* out) {
  out->resize(static_cast<size_t>(n));
  double mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  double lse = mx + std::log(sum);
  for (int i = 0; i < n; ++i) (*out)[static_cast<size_t>(i)] = logits[i] - lse;
}

Expected<std::string> RenderVectorPrompt(const VectorCase& c) {
  if (!c.request.contains("messages") || !c.request["messages"].is_array() ||
      c.request["messages"].empty())
    return InvalidArgument("case {}: request has no messages", c.id);
  std::vector<ChatMessage> messages;
  for (const auto& m : c.request["messages"]) {
    ChatMessage msg;
    FLASHKV_ASSIGN_OR_RETURN(msg.role, ParseRole(m.value("role", std::string("user"))));
    if (!m.contains("content") || !m["content"].is_string())
      return InvalidArgument("case {}: message content is not a string", c.id);
    msg.content = m["content"].get<std::string>();
    messages.push_back(std::move(msg));
  }
  PromptOptions options;
  options.thinking = ThinkingOf(c.request);
  return RenderPrompt(messages, options);
}

Expected<std::vector<int32_t>> VectorPromptTokens(const VectorCase& c, const Tokenizer& tokenizer) {
  FLASHKV_ASSIGN_OR_RETURN(std::string prompt, RenderVectorPrompt(c));
  return tokenizer.EncodeChatPrompt(prompt);
}

Expected<CaseVerdict> CheckVectorPrompt(const VectorCase& c, const Tokenizer& tokenizer) {
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, VectorPromptTokens(c, tokenizer));
  return CompareVectorCase(c, static_cast<int>(tokens.size()), {}, /*check_steps=*/false);
}

std::vector<EngineStep> VectorSteps(const VectorCase& c, const Tokenizer& tokenizer,
                                    std::span<const float> rows, int n_vocab, int top_k) {
  BytesIndex index(tokenizer);
  std::vector<EngineStep> ours;
  std::vector<double> logprobs;
  std::vector<int32_t> order(static_cast<size_t>(n_vocab));
  const size_t steps = std::min(c.steps.size(), rows.size() / static_cast<size_t>(n_vocab));
  for (size_t s = 0; s < steps; ++s) {
    LogSoftmax(rows.data() + s * static_cast<size_t>(n_vocab), n_vocab, &logprobs);
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(top_k, n_vocab);
    // Best first; the lowest id wins ties, as greedy argmax does.
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return logprobs[a] != logprobs[b] ? logprobs[a] > logprobs[b] : a < b;
    });
    EngineStep step;
    step.chosen_bytes = std::string(tokenizer.TokenBytes(order[0]));
    for (int i = 0; i < k; ++i) {
      std::string bytes(tokenizer.TokenBytes(order[static_cast<size_t>(i)]));
      step.top.push_back({{bytes, bytes}, logprobs[order[static_cast<size_t>(i)]]});
    }
    int32_t official = index.Find(c.steps[s].token.bytes);
    step.official_token_known = official >= 0 && official < n_vocab;
    if (step.official_token_known) step.logprob_of_official = logprobs[official];
    ours.push_back(std::move(step));
  }
  return ours;
}

}  // namespace flashkv
