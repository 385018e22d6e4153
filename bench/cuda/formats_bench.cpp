#include "formats_bench.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace flashkv {
namespace {

constexpr double kHbmBytesPerSecond = 4.8e12;  // H200 HBM3e
constexpr int kN = 4096;                       // Flash's model width
constexpr int kF = 2048;                       // Flash's expert width
constexpr int kExperts = 16;                   // experts placed (of Flash's 256)
constexpr int kExpertsUsed = 6;                // Flash's top-k

constexpr DType kTypes[] = {DType::kQ8_0,   DType::kQ6_K,    DType::kQ5_K,   DType::kQ4_K,
                            DType::kMXFP4,  DType::kIQ4_XS,  DType::kIQ4_NL, DType::kQ3_K,
                            DType::kIQ3_S,  DType::kIQ3_XXS, DType::kQ2_K,   DType::kIQ2_S,
                            DType::kIQ2_XS, DType::kIQ2_XXS, DType::kIQ1_M,  DType::kIQ1_S};

// Kernel time per call of everything but the activation quantizer.
double ProductMs(CudaBackend& be, int reps) {
  double ms = 0;
  for (const CudaKernelTime& k : be.ProfileTimes(true)) {
    if (k.name.find("Quantize") == std::string::npos) ms += k.ms;
  }
  return ms / reps;
}

Expected<double> TimeMatVec(CudaBackend& be, const Weight& w, DevPtr<const float> x,
                            DevPtr<float> y, ActQuantMode aq, int reps) {
  be.MatMul(w, x, 1, y, aq);  // warm-up (scratch growth, first launch)
  FLASHKV_RETURN_IF_ERROR(be.Synchronize());
  be.ProfileTimes(true);
  for (int i = 0; i < reps; ++i) be.MatMul(w, x, 1, y, aq);
  FLASHKV_RETURN_IF_ERROR(be.Synchronize());
  return ProductMs(be, reps);
}

// One decode token's routed experts: top-6 of 16 experts of Flash's width (D 4096, F 2048),
// gate/up/down all of the type; kernel time per MoeExperts call without the quantizers.
Expected<double> TimeExperts(CudaBackend& be, const Weight& gate, const Weight& up,
                             const Weight& down, DevPtr<const float> x, DevPtr<const int32_t> sel,
                             DevPtr<const float> wts, DevPtr<float> out, ActQuantMode aq,
                             int reps) {
  MoeArgs a{};
  a.x = x;
  a.selected = sel;
  a.weights = wts;
  a.gate = &gate;
  a.up = &up;
  a.down = &down;
  a.out = out;
  a.n_tokens = 1;
  a.n_used = kExpertsUsed;
  a.clamp = 10.0f;
  a.act_quant = aq;
  be.MoeExperts(a);
  FLASHKV_RETURN_IF_ERROR(be.Synchronize());
  be.ProfileTimes(true);
  for (int i = 0; i < reps; ++i) be.MoeExperts(a);
  FLASHKV_RETURN_IF_ERROR(be.Synchronize());
  return ProductMs(be, reps);
}

}  // namespace

Status RunFormatsBench(CudaBackend& be, const FormatsBenchOptions& o, nlohmann::json& out) {
  // One host buffer of random bytes, the largest type's size, placed as each type in turn.
  uint64_t max_bytes = 0;
  for (DType t : kTypes) {
    FLASHKV_ASSIGN_OR_RETURN(uint64_t rb, RowBytes(t, kN));
    max_bytes = std::max(max_bytes, rb * uint64_t(o.rows));
  }
  std::vector<uint64_t> host((max_bytes + 7) / 8);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (uint64_t& v : host) {  // splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    v = z ^ (z >> 31);
  }
  std::vector<float> xs(kN);
  for (int i = 0; i < kN; ++i) xs[size_t(i)] = float((i * 37) % 101 - 50) / 50.0f;
  FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer xb, be.Alloc(4 * xs.size()));
  FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer yb, be.Alloc(4 * size_t(o.rows)));
  FLASHKV_RETURN_IF_ERROR(be.Write(xb.as<void>(), xs.data(), 4 * xs.size()));
  const std::vector<int32_t> sel = {1, 3, 6, 9, 12, 15};
  const std::vector<float> wts = {0.3f, 0.2f, 0.15f, 0.15f, 0.1f, 0.1f};
  FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer sb, be.Alloc(4 * sel.size()));
  FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer wb, be.Alloc(4 * wts.size()));
  FLASHKV_ASSIGN_OR_RETURN(DeviceBuffer ob, be.Alloc(4 * size_t(kN)));
  FLASHKV_RETURN_IF_ERROR(be.Write(sb.as<void>(), sel.data(), 4 * sel.size()));
  FLASHKV_RETURN_IF_ERROR(be.Write(wb.as<void>(), wts.data(), 4 * wts.size()));
  be.SetProfiling(true);
  nlohmann::json rows = nlohmann::json::array();
  std::printf(
      "one token: dense matvec of [%d, %d] weights, and MoeExperts top-%d of %d experts "
      "(D %d, F %d); kernel us per call, GB/s of weight bytes read (%% of 4.8 TB/s)\n",
      kN, o.rows, kExpertsUsed, kExperts, kN, kF);
  std::printf("%-8s %9s | %10s %8s %6s | %10s %8s %6s | %9s %8s %6s | %9s %8s %6s\n", "type", "MB",
              "q8 us", "GB/s", "%HBM", "f32 us", "GB/s", "%HBM", "exp q8 us", "GB/s", "%HBM",
              "f32 us", "GB/s", "%HBM");
  for (DType t : kTypes) {
    FLASHKV_ASSIGN_OR_RETURN(uint64_t rb, RowBytes(t, kN));
    const uint64_t bytes = rb * uint64_t(o.rows);
    const std::string name = std::string("bench.") + std::string(GetDTypeInfo(t).name);
    WeightSource src{name,
                     t,
                     {uint64_t(kN), uint64_t(o.rows), 1},
                     reinterpret_cast<const uint8_t*>(host.data()),
                     bytes};
    FLASHKV_ASSIGN_OR_RETURN(Weight w, be.PlaceWeight(src));
    nlohmann::json r;
    r["type"] = GetDTypeInfo(t).name;
    r["bytes"] = bytes;
    std::printf("%-8s %9.1f |", std::string(GetDTypeInfo(t).name).c_str(), bytes / 1e6);
    for (ActQuantMode aq : {ActQuantMode::kQ8, ActQuantMode::kOff}) {
      FLASHKV_ASSIGN_OR_RETURN(double ms,
                               TimeMatVec(be, w, xb.as<const float>(), yb.as<float>(), aq, o.reps));
      const double gbs = bytes / (ms * 1e-3) / 1e9;
      const char* key = aq == ActQuantMode::kQ8 ? "q8" : "f32";
      r[key] = {
          {"us", ms * 1e3}, {"gb_per_s", gbs}, {"hbm_fraction", gbs * 1e9 / kHbmBytesPerSecond}};
      std::printf(" %10.1f %8.0f %5.1f%% |", ms * 1e3, gbs, 100.0 * gbs * 1e9 / kHbmBytesPerSecond);
    }
    FLASHKV_ASSIGN_OR_RETURN(uint64_t rb_f, RowBytes(t, kF));
    const uint8_t* hp = reinterpret_cast<const uint8_t*>(host.data());
    const uint64_t gu_bytes = rb * kF * kExperts, dn_bytes = rb_f * kN * kExperts;
    FLASHKV_ASSIGN_OR_RETURN(
        Weight gate,
        be.PlaceWeight({name + ".gate", t, {uint64_t(kN), uint64_t(kF), kExperts}, hp, gu_bytes}));
    FLASHKV_ASSIGN_OR_RETURN(
        Weight up,
        be.PlaceWeight({name + ".up", t, {uint64_t(kN), uint64_t(kF), kExperts}, hp, gu_bytes}));
    FLASHKV_ASSIGN_OR_RETURN(
        Weight down,
        be.PlaceWeight({name + ".down", t, {uint64_t(kF), uint64_t(kN), kExperts}, hp, dn_bytes}));
    const double touched = double(kExpertsUsed) * double(2 * gu_bytes + dn_bytes) / kExperts;
    for (ActQuantMode aq : {ActQuantMode::kQ8, ActQuantMode::kOff}) {
      FLASHKV_ASSIGN_OR_RETURN(
          double ms, TimeExperts(be, gate, up, down, xb.as<const float>(), sb.as<const int32_t>(),
                                 wb.as<const float>(), ob.as<float>(), aq, o.reps));
      const double gbs = touched / (ms * 1e-3) / 1e9;
      const char* key = aq == ActQuantMode::kQ8 ? "experts_q8" : "experts_f32";
      r[key] = {
          {"us", ms * 1e3}, {"gb_per_s", gbs}, {"hbm_fraction", gbs * 1e9 / kHbmBytesPerSecond}};
      std::printf(" %9.1f %8.0f %5.1f%% |", ms * 1e3, gbs, 100.0 * gbs * 1e9 / kHbmBytesPerSecond);
    }
    std::printf("\n");
    rows.push_back(r);
  }
  be.SetProfiling(false);
  out["formats"] = {{"n", kN}, {"rows", o.rows}, {"reps", o.reps}, {"types", rows}};
  return Status::Ok();
}

}  // namespace flashkv
