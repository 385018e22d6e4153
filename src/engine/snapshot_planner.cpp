#include "engine/snapshot_planner.h"

#include <algorithm>

namespace flashkv {

std::optional<int64_t> SharedPrefixAnchors::NextSession(std::span<const int32_t> prompt,
                                                        int64_t restored,
                                                        const CachePolicy& policy) {
  int64_t shared = 0;
  for (const std::vector<int32_t>& p : prompts_) {
    const size_t n = std::min(p.size(), prompt.size());
    size_t i = 0;
    while (i < n && p[i] == prompt[i]) ++i;
    shared = std::max(shared, int64_t(i));
  }
  prompts_.emplace_front(prompt.begin(), prompt.end());
  if (prompts_.size() > options_.remembered_prompts) prompts_.pop_back();

  const CachePolicyOptions& o = policy.options();
  // A prompt equal to a remembered one shares all of it; the anchor still ends before
  // the trimmed tail, never at the very end where generation starts.
  const int64_t boundary = std::min(shared, int64_t(prompt.size()) - 1) - o.boundary_trim_tokens;
  if (boundary < o.min_tokens || boundary < restored + options_.min_gain_tokens) {
    return std::nullopt;
  }
  return boundary;
}

bool SaveAfterReply(const CachePolicy& policy, int64_t n_tokens, int64_t last_saved_tokens) {
  const int64_t step = policy.ContinuedStep();
  if (step <= 0 || n_tokens < policy.options().min_tokens) return false;
  const int64_t frontier = n_tokens / step * step;
  return frontier > 0 && frontier > last_saved_tokens;
}

void AddSavePoint(int64_t point, std::vector<int64_t>* points) {
  auto it = std::lower_bound(points->begin(), points->end(), point);
  if (it == points->end() || *it != point) points->insert(it, point);
}

}  // namespace flashkv
