#include "server/usage.h"

#include <fmt/format.h>

namespace flashkv {

Json OpenAiUsage(const GenerationResult& r) {
  const int64_t prompt = r.cache.prompt_tokens;
  const int64_t cached = r.cache.cached_tokens;
  return Json{{"prompt_tokens", prompt},
              {"completion_tokens", r.completion_tokens},
              {"total_tokens", prompt + r.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", cached}}},
              {"completion_tokens_details", {{"reasoning_tokens", r.reasoning_tokens}}}};
}

Json ResponsesUsage(const GenerationResult& r) {
  const int64_t prompt = r.cache.prompt_tokens;
  const int64_t cached = r.cache.cached_tokens;
  return Json{{"input_tokens", prompt},
              {"input_tokens_details", {{"cached_tokens", cached}}},
              {"output_tokens", r.completion_tokens},
              {"output_tokens_details", {{"reasoning_tokens", r.reasoning_tokens}}},
              {"total_tokens", prompt + r.completion_tokens}};
}

Json AnthropicUsage(const GenerationResult& r) {
  const int64_t prompt = r.cache.prompt_tokens;
  const int64_t cached = r.cache.cached_tokens;
  return Json{{"input_tokens", 0},
              {"cache_creation_input_tokens", prompt - cached},
              {"cache_read_input_tokens", cached},
              {"output_tokens", r.completion_tokens}};
}

std::string CacheHeaderValue(const CacheInfo& cache) {
  std::string v =
      fmt::format("{}; reused={}; prompt={}; restore_ms={:.1f}", CacheSourceName(cache.source),
                  cache.cached_tokens, cache.prompt_tokens, cache.restore_ms);
  if (!cache.detail.empty()) v += "; match=" + cache.detail;
  if (cache.restore_bytes > 0) v += fmt::format("; bytes={}", cache.restore_bytes);
  return v;
}

}  // namespace flashkv
