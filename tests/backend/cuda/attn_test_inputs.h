// Attention test inputs shared by the tiled-kernel and fast-path tests (cuda_tiled_test.cpp,
// cuda_fast_test.cpp): a case's shape, random queries, window, chunk and compressed rows,
// sinks and indexer selections on both backends, and the AttentionArgs over them.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"

namespace flashkv::testing {

struct AttnCase {
  const char* name;
  int n_head, d, n_swa, ratio, top_k, T;
  int64_t pos0;
  bool select;  // indexer selections (ratio 4 only)
  bool cpu;     // also against the CPU (small shapes)
};

// Attention inputs for one case, on both backends.
struct AttnInputs {
  Pair<float> q, kv, ring, comp;
  Pair<int32_t> sel;
  std::unique_ptr<WeightPair> sinks;
  std::vector<float> kv_h, ring_h;
  std::vector<int32_t> sel_h;
  int n_comp_rows = 1;
};

// f16_rows: the window, chunk and compressed rows rounded to F16, as official numerics store
// them (docs/MODEL.md).
inline AttnInputs MakeAttnInputs(CpuBackend& cpu, CudaBackend& gpu, const AttnCase& c,
                                 uint32_t seed, bool f16_rows = false) {
  AttnInputs in;
  const int64_t last = c.pos0 + c.T - 1;
  in.n_comp_rows = c.ratio > 0 ? int((last + 1) / c.ratio) + 1 : 1;
  in.q = PutBoth(cpu, gpu, RandomFloats(size_t(c.T) * c.n_head * c.d, seed, -1, 1));
  auto rows = [&](size_t n, uint32_t s) {
    std::vector<float> v = RandomFloats(n, s, -1, 1);
    if (f16_rows) {
      for (float& x : v) x = F16ToF32(F32ToF16(x));
    }
    return v;
  };
  in.kv_h = rows(size_t(c.T) * c.d, seed + 1);
  in.kv = PutBoth(cpu, gpu, in.kv_h);
  in.ring_h = rows(size_t(c.n_swa) * c.d, seed + 2);
  in.ring = PutBoth(cpu, gpu, in.ring_h);
  in.comp = PutBoth(cpu, gpu, rows(size_t(in.n_comp_rows) * c.d, seed + 3));
  in.sinks = PlaceBoth(cpu, gpu, DType::kF32, {uint64_t(c.n_head), 1, 1},
                       FloatBytes(RandomFloats(c.n_head, seed + 4, -1, 1)));
  // Selections: ascending distinct visible ids, some tokens short of top_k (-1 padded).
  in.sel_h.assign(size_t(c.T) * c.top_k, -1);
  std::mt19937 rng(seed + 5);
  for (int t = 0; t < c.T && c.select; ++t) {
    const int n_vis = int((c.pos0 + t + 1) / c.ratio);
    std::vector<int32_t> ids(n_vis);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const int k = std::min<int>(n_vis, c.top_k - int(t % 5 == 3 ? 3 : 0));
    std::sort(ids.begin(), ids.begin() + k);
    std::copy_n(ids.begin(), k, in.sel_h.begin() + size_t(t) * c.top_k);
  }
  in.sel = PutBoth(cpu, gpu, in.sel_h);
  return in;
}

inline AttentionArgs AttnArgsFor(const AttnCase& c, const AttnInputs& in, bool gpu,
                                 DevPtr<float> out) {
  AttentionArgs a{};
  a.pos0 = c.pos0;
  a.n_tokens = c.T;
  a.n_head = c.n_head;
  a.head_dim = c.d;
  a.n_swa = c.n_swa;
  a.ratio = c.ratio;
  a.top_k = c.top_k;
  a.scale = 1.0f / std::sqrt(float(c.d));
  a.q = (gpu ? in.q.gpu : in.q.cpu).ptr();
  a.kv_new = (gpu ? in.kv.gpu : in.kv.cpu).ptr();
  a.ring = (gpu ? in.ring.gpu : in.ring.cpu).ptr();
  a.comp_rows = (gpu ? in.comp.gpu : in.comp.cpu).ptr();
  if (c.select) a.selected = (gpu ? in.sel.gpu : in.sel.cpu).ptr();
  a.sinks = gpu ? &in.sinks->gpu : &in.sinks->cpu;
  a.out = out;
  return a;
}

}  // namespace flashkv::testing
