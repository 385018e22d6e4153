// The official DeepSeek API test vectors (tests/data/official-vectors, captured from the
// hosted deepseek-v4-flash with greedy decoding and top-20 log-probabilities) and the
// comparison of one engine run against them. Pure data and arithmetic: rendering,
// tokenizing and running the model are the caller's (cli/cmd_check_vectors.cpp), so the
// comparison is unit-testable on synthetic runs. Must not: parse HTTP or run the model.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace flashkv {

// A token as the API reports it: its text and its exact bytes (which may be a partial
// UTF-8 sequence, so bytes, not text, are what we compare).
struct VectorToken {
  std::string text;
  std::string bytes;
};

struct VectorAlternative {
  VectorToken token;
  double logprob = 0;  // -9999 where the API rounds the probability to zero
};

struct VectorStep {
  int step = 0;
  VectorToken token;  // the greedy choice
  double logprob = 0;
  std::vector<VectorAlternative> top;  // up to 20, best first
};

struct VectorCase {
  std::string id;
  std::string kind;        // "short" | "long"
  nlohmann::json request;  // the exact chat/completions request sent
  int prompt_tokens = 0;   // the API's usage.prompt_tokens
  std::vector<VectorStep> steps;
};

// Reads manifest.json and every case file under `dir`; errors name the file and field.
Expected<std::vector<VectorCase>> LoadVectorCases(const std::string& dir);

// What our engine did at one greedy step.
struct EngineStep {
  std::string chosen_bytes;            // bytes of our argmax token
  std::vector<VectorAlternative> top;  // our top-k (k >= 20), best first
  double logprob_of_official = 0;      // our log-probability of the official token
  bool official_token_known = true;    // false if no vocab entry has its bytes
};

struct StepVerdict {
  int step = 0;
  bool chosen_match = false;  // our argmax bytes == official bytes
  double logprob_of_official = 0;
  bool official_token_known = true;
  int top_overlap = 0;         // |our top-20 ∩ official top-20| by bytes, counting only
  int official_top_count = 0;  //   official entries with a real log-probability
};

struct CaseVerdict {
  std::string id;
  int official_prompt_tokens = 0;
  int our_prompt_tokens = 0;
  bool prompt_match = false;
  std::vector<StepVerdict> steps;  // empty when only prompt counts were checked
  // Exit-status meaning: the prompt counts agree and every chosen token matches.
  bool ok() const;
};

// Compares one case. `ours` may be shorter than the official steps (then the missing
// steps fail); pass an empty vector to check only the prompt count.
CaseVerdict CompareVectorCase(const VectorCase& official, int our_prompt_tokens,
                              const std::vector<EngineStep>& ours, bool check_steps);

// One line per step and a summary line per case, for the check-vectors report.
std::string FormatVerdict(const CaseVerdict& verdict);

}  // namespace flashkv
