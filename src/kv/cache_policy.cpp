#include "kv/cache_policy.h"

#include <algorithm>

namespace flashkv {

Expected<CachePolicy> CachePolicy::Create(const CachePolicyOptions& o) {
  if (o.min_tokens < 1 || o.cold_max_tokens < 0 || o.continued_interval_tokens < 0 ||
      o.boundary_trim_tokens < 0 || o.boundary_align_tokens < 0) {
    return InvalidArgument(
        "kv cache policy values must be >= 0 (min tokens >= 1): min {}, cold max {}, interval "
        "{}, trim {}, align {}",
        o.min_tokens, o.cold_max_tokens, o.continued_interval_tokens, o.boundary_trim_tokens,
        o.boundary_align_tokens);
  }
  if (o.cold_max_tokens > 0 && o.cold_max_tokens < o.min_tokens) {
    return InvalidArgument("--kv-cache-cold-max-tokens {} must be 0 or >= --kv-cache-min-tokens {}",
                           o.cold_max_tokens, o.min_tokens);
  }
  return CachePolicy(o);
}

std::optional<int64_t> CachePolicy::ColdBoundary(std::span<const int32_t> prompt,
                                                 const ChatMarkerIds& markers) const {
  const int64_t n = int64_t(prompt.size());
  const CachePolicyOptions& o = options_;
  if (o.cold_max_tokens == 0 || n < o.min_tokens || n > o.cold_max_tokens) return std::nullopt;

  // Chat anchor: the last user marker before the first assistant marker.
  if (markers.user >= 0) {
    int64_t last_user = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (prompt[i] == markers.assistant && markers.assistant >= 0) break;
      if (prompt[i] == markers.user) last_user = i;
    }
    if (last_user >= o.min_tokens) return last_user;
  }

  // Trim the tail BPE may still re-merge, align down to the prefill chunk grid.
  if (n > o.min_tokens + o.boundary_trim_tokens) {
    int64_t stable = n - o.boundary_trim_tokens;
    if (o.boundary_align_tokens > 0) stable -= stable % o.boundary_align_tokens;
    if (stable >= o.min_tokens) return stable;
  }
  return n;
}

int64_t CachePolicy::ContinuedStep() const {
  const int64_t iv = options_.continued_interval_tokens;
  const int64_t al = options_.boundary_align_tokens;
  if (iv <= 0) return 0;
  if (al <= 0) return iv;
  return (iv + al - 1) / al * al;
}

bool CachePolicy::IsContinuedFrontier(int64_t n_tokens, int64_t last_saved_tokens) const {
  const int64_t step = ContinuedStep();
  return step > 0 && n_tokens > 0 && n_tokens % step == 0 && n_tokens >= options_.min_tokens &&
         n_tokens > last_saved_tokens;
}

std::vector<int64_t> CachePolicy::SavePoints(int64_t begin, int64_t end,
                                             std::optional<int64_t> cold_boundary,
                                             int64_t last_saved_tokens) const {
  std::vector<int64_t> points;
  if (cold_boundary && *cold_boundary > begin && *cold_boundary <= end) {
    points.push_back(*cold_boundary);
  }
  const int64_t step = ContinuedStep();
  if (step > 0) {
    for (int64_t f = (begin / step + 1) * step; f <= end; f += step) {
      if (IsContinuedFrontier(f, last_saved_tokens)) points.push_back(f);
    }
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

}  // namespace flashkv
