// Usage accounting in each API's shape (docs/SERVER.md §5.8), including prompt-cache reporting —
// OpenAI prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens /
// cache_creation_input_tokens — and reasoning tokens, only in the fields each API defines
// (Pi read a non-standard cache_write_tokens as another provider's and under-reported cache
// reads), and the x-flashkv-cache header that tells a user why a turn was fast or slow.
// Must not: count tokens itself (the engine's result does).
#pragma once

#include <string>

#include "engine/generation.h"
#include "server/json_util.h"

namespace flashkv {

// Chat and legacy completions.
Json OpenAiUsage(const GenerationResult& r);
Json ResponsesUsage(const GenerationResult& r);
// Anthropic counts the uncached prompt as cache creation (it was written to the live
// KV), so input_tokens is what was neither read nor written: 0.
Json AnthropicUsage(const GenerationResult& r);

inline constexpr char kCacheHeader[] = "x-flashkv-cache";
// "live; reused=1200; prompt=1234; restore_ms=0.0; match=memory-token"
std::string CacheHeaderValue(const CacheInfo& cache);

}  // namespace flashkv
