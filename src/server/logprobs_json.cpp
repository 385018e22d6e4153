#include "server/logprobs_json.h"

#include "tokenizer/utf8.h"

namespace flashkv {
namespace {

Json Bytes(const std::string& token) {
  Json out = Json::array();
  for (char c : token) out.push_back(int(static_cast<unsigned char>(c)));
  return out;
}

Json TokenJson(const std::string& token, float logprob) {
  return Json{
      {"token", utf8::ReplaceInvalid(token)}, {"logprob", logprob}, {"bytes", Bytes(token)}};
}

}  // namespace

std::vector<TokenLogprob> AnswerLogprobs(const std::vector<TokenLogprob>& all) {
  std::vector<TokenLogprob> out;
  for (const TokenLogprob& t : all) {
    if (!t.reasoning) out.push_back(t);
  }
  return out;
}

Json LogprobEntries(const std::vector<TokenLogprob>& entries) {
  Json out = Json::array();
  for (const TokenLogprob& t : entries) {
    Json top = Json::array();
    for (const auto& [token, logprob] : t.top) top.push_back(TokenJson(token, logprob));
    Json e = TokenJson(t.token, t.logprob);
    e["top_logprobs"] = std::move(top);
    out.push_back(std::move(e));
  }
  return out;
}

Json ChatLogprobs(const std::vector<TokenLogprob>& entries) {
  return Json{{"content", LogprobEntries(entries)}, {"refusal", nullptr}};
}

Json CompletionLogprobs(const std::vector<TokenLogprob>& entries, size_t offset) {
  Json tokens = Json::array();
  Json logprobs = Json::array();
  Json top = Json::array();
  Json offsets = Json::array();
  for (const TokenLogprob& t : entries) {
    tokens.push_back(utf8::ReplaceInvalid(t.token));
    logprobs.push_back(t.logprob);
    Json alts = Json::object();
    for (const auto& [token, logprob] : t.top) alts[utf8::ReplaceInvalid(token)] = logprob;
    top.push_back(std::move(alts));
    offsets.push_back(offset);
    offset += t.token.size();
  }
  return Json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(logprobs)},
              {"top_logprobs", std::move(top)},
              {"text_offset", std::move(offsets)}};
}

}  // namespace flashkv
