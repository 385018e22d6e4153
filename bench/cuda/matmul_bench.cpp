#include "matmul_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace flashkv {
namespace {

// Dense int8 tensor-core peak used by issue 13 for the H200 (no sparsity).
constexpr double kInt8PeakTops = 1580.0;
constexpr int kVariants = 3;  // CudaBackendOptions::imma tile shapes
constexpr int kFlashLayers = 43;

struct Shape {
  const char* name;
  int n;       // values per row (per group)
  int rows;    // output rows (all groups)
  int groups;  // MatMulGrouped slices
};
// random:flash's Q8_0 projections, once per layer each (the output head runs on the last
// token only during prefill, so it is not part of a chunk's time).
constexpr Shape kShapes[] = {{"attn_q_a", 4096, 1024, 1},      {"attn_q_b", 1024, 32768, 1},
                             {"attn_kv", 4096, 512, 1},        {"attn_output_a", 4096, 8 * 1024, 8},
                             {"attn_output_b", 8192, 4096, 1}, {"ffn_gate_shexp", 4096, 2048, 1},
                             {"ffn_up_shexp", 4096, 2048, 1},  {"ffn_down_shexp", 2048, 4096, 1}};

struct Timed {
  double ms = 0;  // product kernel per call
  std::vector<float> y;
};

// Kernel time per call of everything but the activation quantizer.
double ProductMs(CudaBackend& be, int reps) {
  double ms = 0;
  for (const CudaKernelTime& k : be.ProfileTimes(true)) {
    if (k.name.find("Quantize") == std::string::npos) ms += k.ms;
  }
  return ms / reps;
}

Expected<Timed> TimeMatMul(CudaBackend& be, const Weight& w, DevPtr<const float> x, int T,
                           int groups, DevPtr<float> y, int reps, bool keep) {
  auto call = [&] {
    if (groups == 1) {
      be.MatMul(w, x, T, y, ActQuantMode::kQ8);
    } else {
      be.MatMulGrouped(w, x, T, groups, y, ActQuantMode::kQ8);
    }
  };
  call();  // warm-up (scratch growth, first launch)
  FLASHKV_RETURN_IF_ERROR(be.Synchronize());
  be.ProfileTimes(true);
  for (int i = 0; i < reps; ++i) call();
  FLASHKV_RETURN_IF_ERROR(be.Synchronize());
  Timed t;
  t.ms = ProductMs(be, reps);
  if (keep) {
    t.y.resize(size_t(T) * w.ne[1]);
    FLASHKV_RETURN_IF_ERROR(be.Read(DevPtr<const void>(y.get()), t.y.data(), 4 * t.y.size()));
  }
  return t;
}

double Tops(double macs, double ms) {
  return 2.0 * macs / (ms * 1e-3) / 1e12;
}

// One Flash layer's routed experts at `tokens` tokens (256 experts, top 6, uniform random
// choices, random weights): MoeExperts' kernels, dp4a vs tensor cores, and whether the
// outputs are bit-identical.
Status RunMoeBench(CudaBackend& be, const MatMulBenchOptions& o, int variant, nlohmann::json& out) {
  const uint64_t D = 4096, F = 2048, E = 256;
  const int k = 6, T = o.tokens;
  FLASHKV_ASSIGN_OR_RETURN(
      Weight gate, be.RandomWeight("bench.gate", DType::kIQ2_XXS, {D, F, E}, 11, 1.0f / 64));
  FLASHKV_ASSIGN_OR_RETURN(Weight up,
                           be.RandomWeight("bench.up", DType::kIQ2_XXS, {D, F, E}, 12, 1.0f / 64));
  FLASHKV_ASSIGN_OR_RETURN(Weight down,
                           be.RandomWeight("bench.down", DType::kQ2_K, {F, D, E}, 13, 1.0f / 45));
  std::mt19937 rng(14);
  std::vector<float> xs(size_t(T) * D);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  for (float& v : xs) v = ud(rng);
  std::vector<int32_t> sel(size_t(T) * k);
  std::vector<float> wts(sel.size());
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < k; ++j) {
      int32_t e;
      do {
        e = int32_t(rng() % E);
      } while (std::find(sel.begin() + t * k, sel.begin() + t * k + j, e) !=
               sel.begin() + t * k + j);
      sel[size_t(t) * k + j] = e;
      wts[size_t(t) * k + j] = 0.2f + 0.1f * float(j);
    }
  }
  FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer xb, be.Alloc(4 * xs.size()));
  FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer sb, be.Alloc(4 * sel.size()));
  FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer wb, be.Alloc(4 * wts.size()));
  FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer ob, be.Alloc(4 * size_t(T) * D));
  FLASHKV_RETURN_IF_ERROR(be.Write(xb.as<void>(), xs.data(), 4 * xs.size()));
  FLASHKV_RETURN_IF_ERROR(be.Write(sb.as<void>(), sel.data(), 4 * sel.size()));
  FLASHKV_RETURN_IF_ERROR(be.Write(wb.as<void>(), wts.data(), 4 * wts.size()));
  MoeArgs a{};
  a.x = xb.as<const float>();
  a.selected = sb.as<const int32_t>();
  a.weights = wb.as<const float>();
  a.gate = &gate;
  a.up = &up;
  a.down = &down;
  a.out = ob.as<float>();
  a.n_tokens = T;
  a.n_used = k;
  a.clamp = 10.0f;
  a.act_quant = ActQuantMode::kQ8;
  // 3 products of D·F per pair.
  const double macs = 3.0 * double(T) * k * double(D) * double(F);
  std::vector<float> first;
  nlohmann::json rows = nlohmann::json::array();
  for (int v : {0, variant}) {
    be.SetImma(v);
    be.MoeExperts(a);  // warm-up
    FLASHKV_RETURN_IF_ERROR(be.Synchronize());
    be.ProfileTimes(true);
    for (int i = 0; i < o.reps; ++i) be.MoeExperts(a);
    FLASHKV_RETURN_IF_ERROR(be.Synchronize());
    double total = 0;
    nlohmann::json kernels = nlohmann::json::object();
    std::string line;
    for (const CudaKernelTime& kt : be.ProfileTimes(true)) {
      total += kt.ms / o.reps;
      kernels[kt.name] = kt.ms / o.reps;
      line += fmt::format("    {:8.3f} ms  {:.90s}\n", kt.ms / o.reps, kt.name);
    }
    std::vector<float> y(size_t(T) * D);
    FLASHKV_RETURN_IF_ERROR(
        be.Read(DevPtr<const void>(ob.as<void>().get()), y.data(), 4 * y.size()));
    const bool same = first.empty() || std::memcmp(y.data(), first.data(), 4 * y.size()) == 0;
    if (first.empty()) first = y;
    std::printf(
        "MoeExperts, %d tokens x top-%d of 256 experts (D 4096, F 2048), %s: %.3f ms per "
        "call, %.1f TOPS%s\n%s",
        T, k, v == 0 ? "dp4a" : "tensor cores", total, Tops(macs, total),
        v == 0 ? "" : (same ? ", bit-identical to dp4a" : ", bits DIFFER from dp4a"), line.c_str());
    rows.push_back({{"imma", v},
                    {"ms", total},
                    {"tops", Tops(macs, total)},
                    {"kernels", kernels},
                    {"bit_identical", same}});
  }
  out["matmul"]["moe_experts"] = rows;
  return Status::Ok();
}

}  // namespace

Status RunMatMulBench(CudaBackend& be, const MatMulBenchOptions& o, nlohmann::json& out) {
  const int default_variant = be.imma() > 0 ? be.imma() : 1;
  be.SetProfiling(true);
  nlohmann::json rows = nlohmann::json::array();
  std::printf(
      "Q8_0 MatMul at %d tokens, q8 activations: kernel ms per call, int8 TOPS "
      "(%% of %.0f), bits vs dp4a\n",
      o.tokens, kInt8PeakTops);
  std::printf("%-16s %6s %6s | %10s %8s |", "shape", "n", "rows", "dp4a ms", "TOPS");
  for (int v = 1; v <= kVariants; ++v) std::printf(" imma%d ms  TOPS (%%peak) bits |", v);
  std::printf("\n");
  std::vector<double> chunk_ms(kVariants + 1, 0.0);
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    FLASHKV_ASSIGN_OR_RETURN(
        Weight w, be.RandomWeight(std::string("bench.") + s.name, DType::kQ8_0,
                                  {uint64_t(s.n), uint64_t(s.rows), 1}, seed++, 1.0f / 64));
    std::vector<float> xs(size_t(o.tokens) * s.n * s.groups);
    std::mt19937 rng{uint32_t(seed)};
    std::uniform_real_distribution<float> d(-3.0f, 3.0f);
    for (float& v : xs) v = d(rng);
    FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer xb, be.Alloc(4 * xs.size()));
    FLASHKV_RETURN_IF_ERROR(be.Write(xb.as<void>(), xs.data(), 4 * xs.size()));
    FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer yb, be.Alloc(size_t(4) * o.tokens * s.rows));
    const double macs = double(o.tokens) * s.rows * s.n;
    nlohmann::json r;
    r["shape"] = s.name;
    r["n"] = s.n;
    r["rows"] = s.rows;
    r["groups"] = s.groups;
    r["tokens"] = o.tokens;
    be.SetImma(0);
    FLASHKV_ASSIGN_OR_RETURN(Timed base, TimeMatMul(be, w, xb.as<const float>(), o.tokens, s.groups,
                                                    yb.as<float>(), o.reps, true));
    chunk_ms[0] += kFlashLayers * base.ms;
    r["dp4a_ms"] = base.ms;
    r["dp4a_tops"] = Tops(macs, base.ms);
    std::printf("%-16s %6d %6d | %10.3f %8.1f |", s.name, s.n, s.rows, base.ms,
                Tops(macs, base.ms));
    for (int v = 1; v <= kVariants; ++v) {
      be.SetImma(v);
      FLASHKV_ASSIGN_OR_RETURN(Timed t, TimeMatMul(be, w, xb.as<const float>(), o.tokens, s.groups,
                                                   yb.as<float>(), o.reps, true));
      const bool same = t.y.size() == base.y.size() &&
                        std::memcmp(t.y.data(), base.y.data(), 4 * t.y.size()) == 0;
      chunk_ms[v] += kFlashLayers * t.ms;
      const std::string key = fmt::format("imma{}", v);
      r[key + "_ms"] = t.ms;
      r[key + "_tops"] = Tops(macs, t.ms);
      r[key + "_bit_identical"] = same;
      std::printf(" %8.3f %6.1f (%4.1f%%) %4s |", t.ms, Tops(macs, t.ms),
                  100.0 * Tops(macs, t.ms) / kInt8PeakTops, same ? "same" : "DIFF");
    }
    std::printf("\n");
    rows.push_back(r);
  }
  std::printf("per %d-token chunk, %d layers of these products: dp4a %.1f ms", o.tokens,
              kFlashLayers, chunk_ms[0]);
  for (int v = 1; v <= kVariants; ++v) std::printf(", imma%d %.1f ms", v, chunk_ms[v]);
  std::printf("\n");
  out["matmul"]["shapes"] = rows;
  out["matmul"]["chunk_ms"] = chunk_ms;
  out["matmul"]["int8_peak_tops"] = kInt8PeakTops;

  // Token sweep on one shape with the threshold lifted: where the tensor cores start to win.
  {
    const Shape s = kShapes[4];  // attn_output_b
    FLASHKV_ASSIGN_OR_RETURN(
        Weight w, be.RandomWeight("bench.sweep", DType::kQ8_0, {uint64_t(s.n), uint64_t(s.rows), 1},
                                  99, 1.0f / 64));
    const int max_t = 512;
    std::vector<float> xs(size_t(max_t) * s.n, 0.5f);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(int(i % 13) - 6) * 0.25f;
    FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer xb, be.Alloc(4 * xs.size()));
    FLASHKV_RETURN_IF_ERROR(be.Write(xb.as<void>(), xs.data(), 4 * xs.size()));
    FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer yb, be.Alloc(size_t(4) * max_t * s.rows));
    nlohmann::json sweep = nlohmann::json::array();
    std::printf("token sweep, %s (%d x %d): tokens, dp4a ms, imma%d ms\n", s.name, s.n, s.rows,
                default_variant);
    for (int T : {1, 2, 4, 8, 16, 24, 32, 48, 64, 128, 256, 512}) {
      be.SetImma(0);
      FLASHKV_ASSIGN_OR_RETURN(
          Timed a, TimeMatMul(be, w, xb.as<const float>(), T, 1, yb.as<float>(), o.reps, true));
      be.SetImma(default_variant, 1);
      FLASHKV_ASSIGN_OR_RETURN(
          Timed b, TimeMatMul(be, w, xb.as<const float>(), T, 1, yb.as<float>(), o.reps, true));
      const bool same = std::memcmp(a.y.data(), b.y.data(), 4 * a.y.size()) == 0;
      std::printf("  %4d %8.4f %8.4f%s\n", T, a.ms, b.ms, same ? "" : "  [bits DIFFER]");
      sweep.push_back({{"tokens", T}, {"dp4a_ms", a.ms}, {"imma_ms", b.ms}, {"same", same}});
    }
    out["matmul"]["token_sweep"] = sweep;
  }
  FLASHKV_RETURN_IF_ERROR(RunMoeBench(be, o, default_variant, out));
  be.SetImma(default_variant);
  be.SetProfiling(false);
  return Status::Ok();
}

}  // namespace flashkv
