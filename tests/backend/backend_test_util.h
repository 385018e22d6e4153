// Helpers for CPU backend op tests: host vectors in and out of device buffers, and F32
// weights built from host values.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"

namespace flashkv::testing {

// A device buffer filled from (or read back into) a host vector.
template <typename T>
struct DevVec {
  DeviceBuffer buf;
  size_t n = 0;
  DevPtr<T> ptr() const { return buf.template as<T>(); }
  std::vector<T> Get(Backend& be) const {
    std::vector<T> v(n);
    EXPECT_TRUE(be.Read(buf.template as<const T>(), v.data(), n * sizeof(T)).ok());
    return v;
  }
};

template <typename T>
DevVec<T> Upload(Backend& be, const std::vector<T>& v) {
  DevVec<T> d;
  d.n = v.size();
  auto buf = be.Alloc(std::max<size_t>(1, v.size()) * sizeof(T));
  EXPECT_TRUE(buf.ok());
  d.buf = std::move(*buf);
  EXPECT_TRUE(be.Write(d.buf.template as<T>(), v.data(), v.size() * sizeof(T)).ok());
  return d;
}

template <typename T>
DevVec<T> Zeros(Backend& be, size_t n) {
  return Upload(be, std::vector<T>(n));
}

// An F32 (or I32) weight over host storage that outlives it.
inline Weight HostWeight(Backend& be, DType type, std::vector<uint64_t> ne, const void* data,
                         uint64_t nbytes) {
  WeightSource src{
      "test",
      type,
      {ne.size() > 0 ? ne[0] : 1, ne.size() > 1 ? ne[1] : 1, ne.size() > 2 ? ne[2] : 1},
      static_cast<const uint8_t*>(data),
      nbytes};
  auto w = be.PlaceWeight(src);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return *w;
}

inline Weight F32Weight(Backend& be, std::vector<uint64_t> ne, const std::vector<float>& v) {
  return HostWeight(be, DType::kF32, std::move(ne), v.data(), v.size() * sizeof(float));
}

}  // namespace flashkv::testing
