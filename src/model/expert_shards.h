// Expert parallel, the host-side plan (docs/MULTI_GPU.md): which routed experts each shard
// (device) holds, and which (token, slot) pairs of a step each shard computes. Pure logic:
// no backend, no weights. Must not: move bytes or run ops (model/sharded_moe.cpp does).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/status.h"

namespace flashkv {

// Shard d holds experts [first(d), first(d) + count(d)): contiguous blocks whose sizes differ
// by at most one, the larger ones first. Contiguous blocks keep each shard's part of a 3-D
// expert stack one byte range of the file (placed without a gather), and the router's
// choices are spread evenly over expert ids, so equal counts are equal expected load.
class ExpertShardPlan {
 public:
  // n_shards in [1, n_expert]: every shard holds at least one expert.
  static Expected<ExpertShardPlan> Make(int n_expert, int n_shards);

  int n_expert() const { return first_.back(); }
  int n_shards() const { return int(first_.size()) - 1; }
  int first(int shard) const { return first_[size_t(shard)]; }
  int count(int shard) const { return first_[size_t(shard) + 1] - first_[size_t(shard)]; }
  // The shard holding `expert` (0 <= expert < n_expert) and its index in that shard's stack.
  int owner(int expert) const;
  int local(int expert) const { return expert - first(owner(expert)); }

 private:
  std::vector<int> first_;  // [n_shards + 1]
};

// One shard's share of a step: the pairs p = token·n_used + slot routed to its experts, in
// ascending p, and each pair's expert as an index into the shard's stack.
struct ShardPairs {
  std::vector<int32_t> pairs;
  std::vector<int32_t> local_expert;
};

// Splits the router's choice `selected` [n_tokens·n_used] over the plan's shards into
// `out` (resized to n_shards; its vectors are reused). Every pair lands in exactly one
// shard. An expert id outside [0, n_expert) is an error (kInvalidArgument naming the pair)
// and leaves `out` unspecified.
Status PartitionPairs(const ExpertShardPlan& plan, std::span<const int32_t> selected,
                      std::vector<ShardPairs>& out);

}  // namespace flashkv
