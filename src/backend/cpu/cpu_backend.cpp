// CpuBackend memory, weight placement and the elementwise ops.
#include "backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_parallel.h"
#include "tensor/quant.h"

namespace flashkv {

uint8_t* CpuBackend::Grow(std::vector<uint8_t>& buf, size_t bytes) {
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

Expected<DeviceBuffer> CpuBackend::Alloc(size_t bytes) {
  // 64-byte alignment keeps rows cache-line aligned; calloc-like zero fill.
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) return ResourceExhausted("cannot allocate {} bytes of host memory", bytes);
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  return DeviceBuffer(this, p, bytes);
}

void CpuBackend::FreeBuffer(void* data) {
  std::free(data);
}

Status CpuBackend::Write(DevPtr<void> dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst.get(), src, bytes);
  return Status::Ok();
}

Expected<uint64_t> CpuBackend::ReadManyAsync(const HostCopy* copies, size_t n) {
  return copier_.Submit(copies, n);
}

Status CpuBackend::WaitCopies(uint64_t ticket) {
  copier_.Wait(ticket);
  return Status::Ok();
}

Status CpuBackend::Read(DevPtr<const void> src, void* dst, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src.get(), bytes);
  return Status::Ok();
}

Expected<Weight> CpuBackend::PlaceWeight(const WeightSource& src) {
  FLASHKV_ASSIGN_OR_RETURN(uint64_t row_bytes, RowBytes(src.type, src.ne[0]));
  const uint64_t need = row_bytes * src.ne[1] * src.ne[2];
  if (need > src.nbytes) {
    return Corrupt("{} bytes needed for shape [{}, {}, {}], tensor holds {}", need, src.ne[0],
                   src.ne[1], src.ne[2], src.nbytes);
  }
  Weight w;
  w.name = src.name;
  w.type = src.type;
  w.ne = src.ne;
  w.row_bytes = row_bytes;
  w.data = DevPtr<const uint8_t>(src.host_data);
  return w;
}

void CpuBackend::Fill(DevPtr<float> dst, float value, size_t n) {
  float* p = dst.get();
  for (size_t i = 0; i < n; ++i) p[i] = value;
}

void CpuBackend::Copy(DevPtr<const float> src, DevPtr<float> dst, size_t n) {
  if (n != 0 && src.get() != dst.get()) std::memmove(dst.get(), src.get(), n * sizeof(float));
}

void CpuBackend::Add(DevPtr<const float> a, DevPtr<const float> b, DevPtr<float> out, size_t n) {
  const float* pa = a.get();
  const float* pb = b.get();
  float* po = out.get();
  for (size_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
}

void CpuBackend::EmbedRows(const Weight& table, DevPtr<const int32_t> tokens, int n_tokens,
                           int n_copies, DevPtr<float> out) {
  const int64_t n_embd = static_cast<int64_t>(table.ne[0]);
  const int32_t* ids = tokens.get();
  float* o = out.get();
  Parallel(n_tokens, 1, [&](size_t t0, size_t t1, int) {
    for (size_t t = t0; t < t1; ++t) {
      float* dst = o + t * n_copies * n_embd;
      const uint8_t* row = table.data.get() + uint64_t(ids[t]) * table.row_bytes;
      // Types were checked at load; DequantizeRow cannot fail here.
      (void)DequantizeRow(table.type, row, dst, n_embd);
      for (int s = 1; s < n_copies; ++s) {
        std::memcpy(dst + s * n_embd, dst, n_embd * sizeof(float));
      }
    }
  });
}

void CpuBackend::SwiGlu(DevPtr<const float> gate, DevPtr<const float> up, DevPtr<float> out,
                        size_t n, float clamp) {
  const float* g = gate.get();
  const float* u = up.get();
  float* o = out.get();
  for (size_t i = 0; i < n; ++i) {
    float gv = g[i];
    float uv = u[i];
    if (clamp > 1.0e-6f) {
      if (gv > clamp) gv = clamp;
      if (uv > clamp) uv = clamp;
      if (uv < -clamp) uv = -clamp;
    }
    o[i] = cpu::Silu(gv) * uv;
  }
}

}  // namespace flashkv
