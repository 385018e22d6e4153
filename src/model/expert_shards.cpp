#include "model/expert_shards.h"

#include <algorithm>

namespace flashkv {

Expected<ExpertShardPlan> ExpertShardPlan::Make(int n_expert, int n_shards) {
  if (n_expert < 1) return InvalidArgument("expert shards: {} experts", n_expert);
  if (n_shards < 1 || n_shards > n_expert) {
    return InvalidArgument("expert shards: {} shards for {} experts (1 to {} allowed)", n_shards,
                           n_expert, n_expert);
  }
  ExpertShardPlan plan;
  plan.first_.resize(size_t(n_shards) + 1);
  const int base = n_expert / n_shards;
  const int extra = n_expert % n_shards;
  plan.first_[0] = 0;
  for (int d = 0; d < n_shards; ++d) {
    plan.first_[size_t(d) + 1] = plan.first_[size_t(d)] + base + (d < extra ? 1 : 0);
  }
  return plan;
}

int ExpertShardPlan::owner(int expert) const {
  // The last shard whose first expert is <= expert.
  auto it = std::upper_bound(first_.begin(), first_.end() - 1, expert);
  return int(it - first_.begin()) - 1;
}

Status PartitionPairs(const ExpertShardPlan& plan, std::span<const int32_t> selected,
                      std::vector<ShardPairs>& out) {
  out.resize(size_t(plan.n_shards()));
  for (ShardPairs& s : out) {
    s.pairs.clear();
    s.local_expert.clear();
  }
  for (size_t p = 0; p < selected.size(); ++p) {
    const int32_t e = selected[p];
    if (e < 0 || e >= plan.n_expert()) {
      return InvalidArgument("expert shards: pair {} routed to expert {} of {}", p, e,
                             plan.n_expert());
    }
    const int d = plan.owner(e);
    out[size_t(d)].pairs.push_back(int32_t(p));
    out[size_t(d)].local_expert.push_back(e - plan.first(d));
  }
  return Status::Ok();
}

}  // namespace flashkv
