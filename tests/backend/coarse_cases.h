// Inputs for the coarse ops (backend.h: SublayerInput, NormRope, MoeBlock), built the same on
// any backend from seeds — weights from Backend::RandomWeight (the same bytes on every
// backend), F32 vectors and activations from seeded host vectors — so one case can run on
// the CPU, on CUDA with the fused kernels off and on, and every output be compared. Each
// case runs its coarse op (Run), or the fine-op chain the op stands for written out here
// (RunFine), and reads back every buffer the chain writes (Outputs). Used by
// coarse_ops_test.cpp (CPU) and cuda/cuda_fused_test.cpp (GPU).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend.h"

namespace flashkv::testing {

// One output buffer read back: its name and its values (int32 outputs as their bits).
struct Output {
  std::string name;
  std::vector<float> v;
  bool ints = false;
};

class CaseBase {
 protected:
  explicit CaseBase(Backend& be) : be_(be) {}

  static std::vector<float> Floats(size_t n, uint32_t seed, float lo, float hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  }
  template <typename T>
  DevPtr<T> Buffer(const std::vector<T>& host) {
    auto b = be_.Alloc(std::max<size_t>(1, host.size()) * sizeof(T));
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return DevPtr<T>();
    EXPECT_TRUE(be_.Write(b->template as<void>(), host.data(), host.size() * sizeof(T)).ok());
    buffers_.push_back(std::move(*b));
    return buffers_.back().template as<T>();
  }
  DevPtr<float> Zeros(size_t n) { return Buffer(std::vector<float>(n)); }
  const Weight* Random(const std::string& name, DType t, std::array<uint64_t, 3> ne, uint64_t seed,
                       float scale) {
    auto w = be_.RandomWeight(name, t, ne, seed, scale);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    weights_.push_back(std::make_unique<Weight>(w.ok() ? *w : Weight()));
    return weights_.back().get();
  }
  // An F32 or I32 weight over host bytes the case keeps.
  template <typename T>
  const Weight* Vector(const std::string& name, DType t, std::array<uint64_t, 3> ne,
                       std::vector<T> values) {
    host_.push_back(std::vector<uint8_t>(values.size() * sizeof(T)));
    std::memcpy(host_.back().data(), values.data(), host_.back().size());
    WeightSource src{name, t, ne, host_.back().data(), host_.back().size()};
    auto w = be_.PlaceWeight(src);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    weights_.push_back(std::make_unique<Weight>(w.ok() ? *w : Weight()));
    return weights_.back().get();
  }
  Output Read(const std::string& name, DevPtr<const float> p, size_t n) {
    Output o{name, std::vector<float>(n)};
    EXPECT_TRUE(be_.Read(DevPtr<const void>(p.get()), o.v.data(), n * sizeof(float)).ok());
    return o;
  }
  Output ReadInts(const std::string& name, DevPtr<const int32_t> p, size_t n) {
    Output o{name, std::vector<float>(n), true};
    EXPECT_TRUE(be_.Read(DevPtr<const void>(p.get()), o.v.data(), n * sizeof(int32_t)).ok());
    return o;
  }

  Backend& be_;

 private:
  std::vector<DeviceBuffer> buffers_;
  std::vector<std::vector<uint8_t>> host_;
  std::vector<std::unique_ptr<Weight>> weights_;
};

// "prefix<i>" (appended: GCC 12 warns falsely about `literal + std::to_string`).
inline std::string Numbered(std::string prefix, int i) {
  prefix += std::to_string(i);
  return prefix;
}

inline HcParams CaseHc(int n_hc, int n_embd) {
  return HcParams{n_hc, n_embd, 20, 1e-6f, 1e-6f};
}

// HC_pre → RMSNorm → projections. Projections are (type, rows) over n_embd columns.
class SublayerInputCase : public CaseBase {
 public:
  struct Dims {
    int n_tokens = 1;
    int n_hc = 4;
    int n_embd = 256;
    std::vector<std::pair<DType, int>> proj;
    ActQuantMode aq = ActQuantMode::kQ8;
  };
  SublayerInputCase(Backend& be, const Dims& d, uint32_t seed) : CaseBase(be), d_(d) {
    const int T = d.n_tokens, n = d.n_hc, D = d.n_embd, hc_dim = n * D, mix = (2 + n) * n;
    a_.x_hc = Buffer(Floats(size_t(T) * hc_dim, seed, -2.0f, 2.0f));
    a_.n_tokens = T;
    a_.hc_fn = Random("hc_fn", DType::kF16, {uint64_t(hc_dim), uint64_t(mix), 1}, seed + 1,
                      1.0f / std::sqrt(float(hc_dim)));
    a_.hc_scale = Vector("hc_scale", DType::kF32, {3, 1, 1}, Floats(3, seed + 2, 0.5f, 1.5f));
    a_.hc_base =
        Vector("hc_base", DType::kF32, {uint64_t(mix), 1, 1}, Floats(mix, seed + 3, -1.0f, 1.0f));
    a_.hc = CaseHc(n, D);
    a_.norm = Vector("norm", DType::kF32, {uint64_t(D), 1, 1}, Floats(D, seed + 4, 0.5f, 1.5f));
    a_.eps = 1e-6f;
    a_.u = Zeros(size_t(T) * D);
    a_.post = Zeros(size_t(T) * n);
    a_.comb = Zeros(size_t(T) * n * n);
    a_.xn = Zeros(size_t(T) * D);
    for (size_t i = 0; i < d.proj.size(); ++i) {
      const auto [type, rows] = d.proj[i];
      a_.proj[i] = {Random(Numbered("proj", int(i)), type, {uint64_t(D), uint64_t(rows), 1},
                           seed + 10 + i, 1.0f / std::sqrt(float(D))),
                    Zeros(size_t(T) * rows)};
    }
    a_.n_proj = int(d.proj.size());
    a_.aq = d.aq;
  }
  void Run() { be_.SublayerInput(a_); }
  void RunFine() {
    const int T = a_.n_tokens;
    be_.HcPre(a_.x_hc, T, *a_.hc_fn, *a_.hc_scale, *a_.hc_base, a_.hc, a_.u, a_.post, a_.comb);
    be_.RmsNorm(a_.u, T, a_.hc.n_embd, a_.norm, a_.eps, a_.xn);
    for (int i = 0; i < a_.n_proj; ++i) be_.MatMul(*a_.proj[i].w, a_.xn, T, a_.proj[i].y, a_.aq);
  }
  std::vector<Output> Outputs() {
    const size_t T = size_t(a_.n_tokens), n = size_t(d_.n_hc), D = size_t(d_.n_embd);
    std::vector<Output> o = {Read("u", a_.u, T * D), Read("post", a_.post, T * n),
                             Read("comb", a_.comb, T * n * n), Read("xn", a_.xn, T * D)};
    for (int i = 0; i < a_.n_proj; ++i) {
      o.push_back(Read(Numbered("y", i), a_.proj[i].y, T * a_.proj[i].w->ne[1]));
    }
    return o;
  }

 private:
  Dims d_;
  SublayerInputArgs a_;
};

// RMSNorm → RoPE → FP8 → F16 of [n_rows, n_heads, head_dim] in place.
class NormRopeCase : public CaseBase {
 public:
  struct Dims {
    int n_rows = 1;
    int n_heads = 1;
    int head_dim = 512;
    int n_rot = 64;
    bool weight = false;
    int fp8_prefix = 0;
    bool f16_round = false;
    int64_t pos0 = 0;
    int64_t pos_step = 1;
    bool yarn = true;
  };
  NormRopeCase(Backend& be, const Dims& d, uint32_t seed) : CaseBase(be) {
    const size_t n = size_t(d.n_rows) * d.n_heads * d.head_dim;
    a_.x = Buffer(Floats(n, seed, -3.0f, 3.0f));
    a_.n_rows = d.n_rows;
    a_.n_heads = d.n_heads;
    a_.head_dim = d.head_dim;
    if (d.weight) {
      a_.weight = Vector("w", DType::kF32, {uint64_t(d.head_dim), 1, 1},
                         Floats(d.head_dim, seed + 1, 0.5f, 1.5f));
    }
    a_.eps = 1e-6f;
    a_.rope.n_rot = d.n_rot;
    a_.rope.freq_base = d.yarn ? 160000.0f : 10000.0f;
    if (d.yarn) {  // Flash's compressed-layer rope
      a_.rope.freq_scale = 0.0625f;
      a_.rope.ext_factor = 1.0f;
      a_.rope.corr_lo = 8.0f;
      a_.rope.corr_hi = 24.0f;
      a_.rope.mscale = 1.2772588f;
    }
    a_.pos0 = d.pos0;
    a_.pos_step = d.pos_step;
    a_.fp8_prefix = d.fp8_prefix;
    a_.f16_round = d.f16_round;
    n_ = n;
  }
  void Run() { be_.NormRope(a_); }
  void RunFine() {
    const int rows = a_.n_rows * a_.n_heads;
    be_.RmsNorm(a_.x, rows, a_.head_dim, a_.weight, a_.eps, a_.x);
    be_.Rope(a_.x, a_.n_rows, a_.n_heads, a_.head_dim, a_.rope, a_.pos0, a_.pos_step, false);
    if (a_.fp8_prefix > 0) be_.Fp8RoundTrip(a_.x, rows, a_.head_dim, a_.fp8_prefix);
    if (a_.f16_round) be_.F16Round(a_.x, size_t(rows) * a_.head_dim);
  }
  std::vector<Output> Outputs() { return {Read("x", a_.x, n_)}; }

 private:
  NormRopeArgs a_;
  size_t n_ = 0;
};

// Router → routed experts → shared expert → sum → HC_post, in the ds4 type mix (F16 router,
// IQ2_XXS gate/up, Q2_K down, Q8_0 shared expert).
class MoeBlockCase : public CaseBase {
 public:
  struct Dims {
    int n_tokens = 1;
    int n_embd = 256;
    int n_expert = 8;
    int n_used = 2;
    int n_ff = 256;
    int n_ff_shared = 256;
    int n_hc = 4;
    bool hash = false;  // tid2eid routing (else top-k + bias)
    ActQuantMode aq = ActQuantMode::kQ8;
  };
  MoeBlockCase(Backend& be, const Dims& d, uint32_t seed) : CaseBase(be), d_(d) {
    const int T = d.n_tokens, D = d.n_embd, E = d.n_expert, k = d.n_used, F = d.n_ff,
              Fs = d.n_ff_shared, n = d.n_hc;
    const int vocab = 64;
    a_.x = Buffer(Floats(size_t(T) * D, seed, -2.0f, 2.0f));
    a_.n_tokens = T;
    a_.aq = d.aq;
    a_.router = Random("router", DType::kF16, {uint64_t(D), uint64_t(E), 1}, seed + 1,
                       1.0f / std::sqrt(float(D)));
    if (d.hash) {
      std::vector<int32_t> table(size_t(vocab) * k);
      std::mt19937 rng(seed + 2);
      for (auto& e : table) e = int32_t(rng() % uint32_t(E));
      a_.tid2eid = Vector("tid2eid", DType::kI32, {uint64_t(k), uint64_t(vocab), 1}, table);
    } else {
      a_.router_bias =
          Vector("bias", DType::kF32, {uint64_t(E), 1, 1}, Floats(E, seed + 2, -0.2f, 0.2f));
    }
    std::vector<int32_t> tokens(T);
    std::mt19937 rng(seed + 3);
    for (auto& t : tokens) t = int32_t(rng() % uint32_t(vocab));
    a_.tokens = Buffer(tokens);
    a_.logits = Zeros(size_t(T) * E);
    a_.selected = Buffer(std::vector<int32_t>(size_t(T) * k));
    a_.weights = Zeros(size_t(T) * k);
    a_.n_used = k;
    a_.weight_scale = 1.5f;
    const float s_in = 1.0f / std::sqrt(float(D));
    a_.gate =
        Random("gate", DType::kIQ2_XXS, {uint64_t(D), uint64_t(F), uint64_t(E)}, seed + 4, s_in);
    a_.up = Random("up", DType::kIQ2_XXS, {uint64_t(D), uint64_t(F), uint64_t(E)}, seed + 5, s_in);
    a_.down = Random("down", DType::kQ2_K, {uint64_t(F), uint64_t(D), uint64_t(E)}, seed + 6,
                     1.0f / std::sqrt(float(F)));
    a_.clamp = 10.0f;
    a_.routed = Zeros(size_t(T) * D);
    a_.shared_gate =
        Random("sh_gate", DType::kQ8_0, {uint64_t(D), uint64_t(Fs), 1}, seed + 7, s_in);
    a_.shared_up = Random("sh_up", DType::kQ8_0, {uint64_t(D), uint64_t(Fs), 1}, seed + 8, s_in);
    a_.shared_down = Random("sh_down", DType::kQ8_0, {uint64_t(Fs), uint64_t(D), 1}, seed + 9,
                            1.0f / std::sqrt(float(Fs)));
    a_.shared_gate_out = Zeros(size_t(T) * Fs);
    a_.shared_up_out = Zeros(size_t(T) * Fs);
    a_.shared_mid = Zeros(size_t(T) * Fs);
    a_.f = Zeros(size_t(T) * D);
    a_.x_hc = Buffer(Floats(size_t(T) * n * D, seed + 10, -2.0f, 2.0f));
    a_.post = Buffer(Floats(size_t(T) * n, seed + 11, 0.0f, 2.0f));
    a_.comb = Buffer(Floats(size_t(T) * n * n, seed + 12, 0.0f, 0.5f));
    a_.hc = CaseHc(n, D);
    a_.out = Zeros(size_t(T) * n * D);
  }
  void Run() { be_.MoeBlock(a_); }
  void RunFine() {
    const int T = a_.n_tokens;
    be_.MatMul(*a_.router, a_.x, T, a_.logits, a_.aq);
    RouterArgs r;
    r.logits = a_.logits;
    r.bias = a_.router_bias;
    r.tid2eid = a_.tid2eid;
    r.tokens = a_.tokens;
    r.selected = a_.selected;
    r.weights = a_.weights;
    r.n_tokens = T;
    r.n_expert = d_.n_expert;
    r.n_used = d_.n_used;
    r.weight_scale = a_.weight_scale;
    be_.RouterSelect(r);
    MoeArgs m;
    m.x = a_.x;
    m.selected = a_.selected;
    m.weights = a_.weights;
    m.gate = a_.gate;
    m.up = a_.up;
    m.down = a_.down;
    m.out = a_.routed;
    m.n_tokens = T;
    m.n_used = d_.n_used;
    m.clamp = a_.clamp;
    m.act_quant = a_.aq;
    be_.MoeExperts(m);
    be_.MatMul(*a_.shared_gate, a_.x, T, a_.shared_gate_out, a_.aq);
    be_.MatMul(*a_.shared_up, a_.x, T, a_.shared_up_out, a_.aq);
    be_.SwiGlu(a_.shared_gate_out, a_.shared_up_out, a_.shared_mid, size_t(T) * d_.n_ff_shared,
               a_.clamp);
    be_.MatMul(*a_.shared_down, a_.shared_mid, T, a_.f, a_.aq);
    be_.Add(a_.routed, a_.f, a_.f, size_t(T) * d_.n_embd);
    be_.HcPost(a_.x_hc, a_.f, a_.post, a_.comb, T, a_.hc, a_.out);
  }
  std::vector<Output> Outputs() {
    const size_t T = size_t(a_.n_tokens), D = size_t(d_.n_embd), Fs = size_t(d_.n_ff_shared);
    return {Read("logits", a_.logits, T * d_.n_expert),
            ReadInts("selected", a_.selected, T * d_.n_used),
            Read("weights", a_.weights, T * d_.n_used),
            Read("routed", a_.routed, T * D),
            Read("shared_gate", a_.shared_gate_out, T * Fs),
            Read("shared_up", a_.shared_up_out, T * Fs),
            Read("shared_mid", a_.shared_mid, T * Fs),
            Read("f", a_.f, T * D),
            Read("out", a_.out, T * d_.n_hc * D)};
  }

 private:
  Dims d_;
  MoeBlockArgs a_;
};

// Bit equality of two runs' outputs, output by output.
inline void ExpectBitIdentical(const std::vector<Output>& want, const std::vector<Output>& got,
                               const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].v.size(), got[i].v.size()) << what << ": " << want[i].name;
    size_t diff = 0, first = 0;
    for (size_t j = 0; j < want[i].v.size(); ++j) {
      if (std::memcmp(&want[i].v[j], &got[i].v[j], sizeof(float)) != 0 && diff++ == 0) first = j;
    }
    EXPECT_EQ(diff, 0u) << what << ": " << want[i].name << " differs in " << diff << " of "
                        << want[i].v.size() << " values, first at " << first;
  }
}

}  // namespace flashkv::testing
