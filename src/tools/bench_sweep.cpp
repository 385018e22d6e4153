#include "tools/bench_sweep.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace flashkv {
namespace {

constexpr KvSection kAllSections[] = {KvSection::kRaw,          KvSection::kCompressed,
                                      KvSection::kCompressorKv, KvSection::kCompressorScore,
                                      KvSection::kIndexerRows,  KvSection::kIndexerKv,
                                      KvSection::kIndexerScore};

Status CheckOptions(const BenchOptions& o) {
  if (o.ctx_start <= 0) return InvalidArgument("--ctx-start must be positive, got {}", o.ctx_start);
  if (o.ctx_max < o.ctx_start) {
    return InvalidArgument("--ctx-max {} is below --ctx-start {}", o.ctx_max, o.ctx_start);
  }
  if (o.step_mul > 0) {
    if (!(o.step_mul > 1.0) || !std::isfinite(o.step_mul)) {
      return InvalidArgument("--step-mul must be a finite number > 1, got {}", o.step_mul);
    }
  } else if (o.step_incr <= 0) {
    return InvalidArgument("--step-incr must be positive, got {}", o.step_incr);
  }
  if (o.gen_tokens < 0) return InvalidArgument("--gen-tokens must be >= 0, got {}", o.gen_tokens);
  if (o.prefill_chunk <= 0) {
    return InvalidArgument("the prefill chunk must be positive, got {}", o.prefill_chunk);
  }
  if (int64_t(o.ctx_max) + o.gen_tokens > std::numeric_limits<int>::max()) {
    return InvalidArgument("--ctx-max {} + --gen-tokens {} overflows", o.ctx_max, o.gen_tokens);
  }
  if (o.ctx_alloc != 0 && o.ctx_alloc < o.ctx_max + o.gen_tokens) {
    return InvalidArgument("--ctx-alloc {} is smaller than --ctx-max {} + --gen-tokens {}",
                           o.ctx_alloc, o.ctx_max, o.gen_tokens);
  }
  return Status::Ok();
}

}  // namespace

Expected<std::vector<int>> BenchFrontiers(const BenchOptions& o) {
  FLASHKV_RETURN_IF_ERROR(CheckOptions(o));
  std::vector<int> out;
  int64_t ctx = o.ctx_start;
  while (ctx <= o.ctx_max) {
    out.push_back(int(ctx));
    int64_t next =
        o.step_mul > 1.0 ? int64_t(std::ceil(double(ctx) * o.step_mul)) : ctx + o.step_incr;
    ctx = std::max(next, ctx + 1);  // a ceil of a tiny step still moves
  }
  if (out.back() != o.ctx_max) out.push_back(o.ctx_max);
  return out;
}

uint64_t LiveKvBytes(const KvShape& shape, int64_t n_tokens) {
  uint64_t floats = 0;
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    for (KvSection s : kAllSections)
      floats += KvState::SectionFloatsFor(shape, int(l), s, n_tokens);
  }
  return floats * sizeof(float);
}

uint64_t KvAllocBytes(const KvState& state) {
  const KvShape& shape = state.shape();
  uint64_t floats = 0;
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    const int L = int(l);
    const uint64_t cap = uint64_t(state.layer(L).comp_cap);
    floats += uint64_t(shape.n_swa) * shape.head_dim;
    floats +=
        cap * shape.head_dim + 2 * KvState::SectionFloatsFor(shape, L, KvSection::kCompressorKv, 0);
    if (shape.layers[l].indexer) {
      floats += cap * shape.indexer_dim +
                2 * KvState::SectionFloatsFor(shape, L, KvSection::kIndexerKv, 0);
    }
  }
  return floats * sizeof(float);
}

}  // namespace flashkv
