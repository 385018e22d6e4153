#include "tools/official_vectors.h"

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace flashkv {
namespace {

Expected<nlohmann::json> ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt("{} is not valid JSON", path);
  return j;
}

Expected<VectorToken> ParseToken(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("bytes") || !j["bytes"].is_array())
    return Corrupt("{}: token without a bytes array", where);
  VectorToken t;
  if (j.contains("text") && j["text"].is_string()) t.text = j["text"].get<std::string>();
  for (const auto& b : j["bytes"]) {
    if (!b.is_number_integer() || b.get<int>() < 0 || b.get<int>() > 255)
      return Corrupt("{}: token byte out of range", where);
    t.bytes.push_back(static_cast<char>(b.get<int>()));
  }
  return t;
}

Expected<VectorCase> ParseCase(const nlohmann::json& j, const std::string& path) {
  VectorCase c;
  if (!j.contains("id") || !j["id"].is_string()) return Corrupt("{}: missing id", path);
  c.id = j["id"].get<std::string>();
  if (j.contains("kind") && j["kind"].is_string()) c.kind = j["kind"].get<std::string>();
  if (!j.contains("request") || !j["request"].is_object())
    return Corrupt("{}: missing request", path);
  c.request = j["request"];
  const auto* usage = j.contains("usage") ? &j["usage"] : nullptr;
  if (!usage || !usage->contains("prompt_tokens") || !(*usage)["prompt_tokens"].is_number_integer())
    return Corrupt("{}: missing usage.prompt_tokens", path);
  c.prompt_tokens = (*usage)["prompt_tokens"].get<int>();
  if (!j.contains("steps") || !j["steps"].is_array()) return Corrupt("{}: missing steps", path);
  for (const auto& s : j["steps"]) {
    VectorStep step;
    std::string where = fmt::format("{} step {}", path, c.steps.size());
    step.step = s.value("step", static_cast<int>(c.steps.size()));
    FLASHKV_ASSIGN_OR_RETURN(step.token, ParseToken(s.value("token", nlohmann::json()), where));
    step.logprob = s.value("logprob", 0.0);
    if (s.contains("top_logprobs") && s["top_logprobs"].is_array()) {
      for (const auto& alt : s["top_logprobs"]) {
        VectorAlternative a;
        FLASHKV_ASSIGN_OR_RETURN(a.token, ParseToken(alt.value("token", nlohmann::json()), where));
        a.logprob = alt.value("logprob", -9999.0);
        step.top.push_back(std::move(a));
      }
    }
    c.steps.push_back(std::move(step));
  }
  return c;
}

}  // namespace

Expected<std::vector<VectorCase>> LoadVectorCases(const std::string& dir) {
  FLASHKV_ASSIGN_OR_RETURN(nlohmann::json manifest, ReadJson(dir + "/manifest.json"));
  if (!manifest.contains("prompts") || !manifest["prompts"].is_array())
    return Corrupt("{}/manifest.json: missing prompts array", dir);
  std::vector<VectorCase> cases;
  for (const auto& p : manifest["prompts"]) {
    if (!p.contains("official_file") || !p["official_file"].is_string())
      return Corrupt("{}/manifest.json: a prompt without official_file", dir);
    std::string path = dir + "/" + p["official_file"].get<std::string>();
    FLASHKV_ASSIGN_OR_RETURN(nlohmann::json j, ReadJson(path));
    FLASHKV_ASSIGN_OR_RETURN(VectorCase c, ParseCase(j, path));
    cases.push_back(std::move(c));
  }
  return cases;
}

bool CaseVerdict::ok() const {
  if (!prompt_match) return false;
  for (const auto& s : steps)
    if (!s.chosen_match) return false;
  return true;
}

CaseVerdict CompareVectorCase(const VectorCase& official, int our_prompt_tokens,
                              const std::vector<EngineStep>& ours, bool check_steps) {
  CaseVerdict v;
  v.id = official.id;
  v.official_prompt_tokens = official.prompt_tokens;
  v.our_prompt_tokens = our_prompt_tokens;
  v.prompt_match = official.prompt_tokens == our_prompt_tokens;
  if (!check_steps) return v;
  for (size_t i = 0; i < official.steps.size(); ++i) {
    const VectorStep& off = official.steps[i];
    StepVerdict sv;
    sv.step = off.step;
    if (i >= ours.size()) {
      v.steps.push_back(sv);  // a missing step is a mismatch
      continue;
    }
    const EngineStep& our = ours[i];
    sv.chosen_match = our.chosen_bytes == off.token.bytes;
    sv.logprob_of_official = our.logprob_of_official;
    sv.official_token_known = our.official_token_known;
    std::set<std::string> official_top;
    for (const auto& a : off.top)
      if (a.logprob > -9999.0) official_top.insert(a.token.bytes);
    sv.official_top_count = static_cast<int>(official_top.size());
    size_t k = std::min<size_t>(our.top.size(), 20);
    for (size_t j = 0; j < k; ++j) sv.top_overlap += official_top.count(our.top[j].token.bytes);
    v.steps.push_back(sv);
  }
  return v;
}

std::string FormatVerdict(const CaseVerdict& v) {
  std::string out =
      fmt::format("case {}: prompt tokens ours={} official={} {}\n", v.id, v.our_prompt_tokens,
                  v.official_prompt_tokens, v.prompt_match ? "OK" : "MISMATCH");
  for (const auto& s : v.steps) {
    out += fmt::format(
        "  step {}: chosen {}  logprob(official)={}  top20 overlap {}/{}\n", s.step,
        s.chosen_match ? "OK" : "MISMATCH",
        s.official_token_known ? fmt::format("{:.4f}", s.logprob_of_official) : std::string("n/a"),
        s.top_overlap, s.official_top_count);
  }
  out += fmt::format("case {}: {}\n", v.id, v.ok() ? "PASS" : "FAIL");
  return out;
}

}  // namespace flashkv
