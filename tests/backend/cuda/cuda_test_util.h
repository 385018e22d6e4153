// Helpers for the CUDA tests: a process-wide CudaBackend (tests skip when no GPU is
// present), random host data, buffers mirrored on the CPU and CUDA backends, and
// comparisons that report the worst element.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "tensor/half.h"
#include "tensor/quant.h"

namespace flashkv::testing {

// Whether this machine has a usable GPU (probed once).
inline bool HaveGpu() {
  static const bool have = CudaBackend::Create().ok();
  return have;
}

// A fresh CUDA backend per test, so a sticky device error stays in the test that caused it.
inline CudaBackend* SharedCuda() {
  static std::unique_ptr<CudaBackend> be;
  static const ::testing::TestInfo* owner = nullptr;
  const ::testing::TestInfo* now = ::testing::UnitTest::GetInstance()->current_test_info();
  if (be == nullptr || owner != now) {
    be.reset();
    auto r = CudaBackend::Create();
    if (r.ok()) be = std::move(*r);
    owner = now;
  }
  return be.get();
}

#define FLASHKV_REQUIRE_GPU()                           \
  do {                                                  \
    if (!::flashkv::testing::HaveGpu()) {               \
      GTEST_SKIP() << "no CUDA device on this machine"; \
    }                                                   \
  } while (0)

// Whether a kernel whose name contains `name` ran since the last call, with profiling on
// (CudaBackend::SetProfiling); forgets the profile.
inline bool KernelRan(CudaBackend& be, const std::string& name) {
  bool ran = false;
  for (const CudaKernelTime& k : be.ProfileTimes(true)) {
    ran = ran || k.name.find(name) != std::string::npos;
  }
  return ran;
}

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A host vector uploaded to one backend.
template <typename T>
struct Buf {
  DeviceBuffer buf;
  size_t n = 0;
  DevPtr<T> ptr() const { return buf.template as<T>(); }
};

template <typename T>
Buf<T> Put(Backend& be, const std::vector<T>& v) {
  Buf<T> b;
  b.n = v.size();
  auto r = be.Alloc(std::max<size_t>(1, v.size()) * sizeof(T));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  b.buf = std::move(*r);
  EXPECT_TRUE(be.Write(b.buf.template as<T>(), v.data(), v.size() * sizeof(T)).ok());
  return b;
}

template <typename T>
std::vector<T> Get(Backend& be, const Buf<T>& b) {
  std::vector<T> v(b.n);
  const Status s = be.Read(b.buf.template as<const T>(), v.data(), v.size() * sizeof(T));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return v;
}

// The same host vector on both backends.
template <typename T>
struct Pair {
  Buf<T> cpu;
  Buf<T> gpu;
};
template <typename T>
Pair<T> PutBoth(CpuBackend& cpu, CudaBackend& gpu, const std::vector<T>& v) {
  return Pair<T>{Put(cpu, v), Put<T>(gpu, v)};
}

// A weight on both backends over host bytes that the test keeps alive.
struct WeightPair {
  std::vector<uint8_t> bytes;
  Weight cpu;
  Weight gpu;
};
inline std::unique_ptr<WeightPair> PlaceBoth(CpuBackend& cpu, CudaBackend& gpu, DType type,
                                             std::array<uint64_t, 3> ne, std::vector<uint8_t> bytes,
                                             const std::string& name = "w") {
  auto w = std::make_unique<WeightPair>();
  w->bytes = std::move(bytes);
  WeightSource src{name, type, ne, w->bytes.data(), w->bytes.size()};
  auto c = cpu.PlaceWeight(src);
  auto g = gpu.PlaceWeight(src);
  EXPECT_TRUE(c.ok() && g.ok());
  w->cpu = *c;
  w->gpu = *g;
  return w;
}
inline std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Valid random blocks of type t: rows quantized from uniform values in ±scale (IQ2_XXS: random
// bits with small finite scales).
inline std::vector<uint8_t> RandomWeightBytes(DType t, uint64_t n, uint64_t rows, uint32_t seed,
                                              float scale = 1.0f) {
  const uint64_t row_bytes = *RowBytes(t, n);
  std::vector<uint8_t> out(row_bytes * rows);
  std::mt19937 rng(seed);
  if (t == DType::kIQ2_XXS) {  // any bits are a valid block once the scale is finite
    for (auto& b : out) b = uint8_t(rng());
    std::uniform_real_distribution<float> d(0.002f, 0.02f);
    for (uint64_t b = 0; b < out.size() / 66; ++b) {
      const uint16_t h = F32ToF16(d(rng) * scale);
      std::memcpy(&out[b * 66], &h, 2);
    }
    return out;
  }
  for (uint64_t r = 0; r < rows; ++r) {
    const std::vector<float> v = RandomFloats(n, seed * 7919u + uint32_t(r), -scale, scale);
    EXPECT_TRUE(QuantizeRow(t, v.data(), out.data() + r * row_bytes, int64_t(n)).ok());
  }
  return out;
}

struct Diff {
  double max_abs = 0;
  size_t worst = 0;
  size_t mismatches = 0;  // elements whose bits differ
};
inline Diff Compare(const std::vector<float>& a, const std::vector<float>& b) {
  Diff d;
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) ++d.mismatches;
    const double e = std::fabs(double(a[i]) - double(b[i]));
    if (!(e <= d.max_abs)) {
      d.max_abs = e;
      d.worst = i;
    }
  }
  return d;
}
inline double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

}  // namespace flashkv::testing
