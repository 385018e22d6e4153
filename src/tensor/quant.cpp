#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/half.h"
#include "tensor/iq1_tables.h"
#include "tensor/iq2_tables.h"
#include "tensor/iq3_tables.h"
#include "tensor/quant_internal.h"
#include "tensor/quant_k.h"

namespace flashkv {
namespace internal {

void DequantBlockQ8_0(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
  for (int i = 0; i < kQK8_0; ++i) out[i] = d * static_cast<float>(qs[i]);
}

void DequantBlockQ2_K(const uint8_t* block, float* out) {
  const uint8_t* scales = block;
  const uint8_t* qs = block + 16;
  const float d = LoadHalf(block + 80);
  const float dmin = LoadHalf(block + 82);
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 4; ++s) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t sc = scales[8 * h + 2 * s + part];
        const float dl = d * static_cast<float>(sc & 15);
        const float ml = dmin * static_cast<float>(sc >> 4);
        float* o = out + 128 * h + 32 * s + 16 * part;
        const uint8_t* q = qs + 32 * h + 16 * part;
        for (int l = 0; l < 16; ++l) o[l] = dl * static_cast<float>((q[l] >> (2 * s)) & 3) - ml;
      }
    }
  }
}

void DequantBlockQ4_K(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float dmin = LoadHalf(block + 2);
  const uint8_t* scales = block + 4;
  const uint8_t* qs = block + 16;
  for (int p = 0; p < 4; ++p) {
    int sc0, mn0, sc1, mn1;
    Q4KScaleMin(scales, 2 * p, &sc0, &mn0);
    Q4KScaleMin(scales, 2 * p + 1, &sc1, &mn1);
    const float d0 = d * static_cast<float>(sc0), m0 = dmin * static_cast<float>(mn0);
    const float d1 = d * static_cast<float>(sc1), m1 = dmin * static_cast<float>(mn1);
    const uint8_t* q = qs + 32 * p;
    for (int l = 0; l < 32; ++l) out[64 * p + l] = d0 * static_cast<float>(q[l] & 15) - m0;
    for (int l = 0; l < 32; ++l) out[64 * p + 32 + l] = d1 * static_cast<float>(q[l] >> 4) - m1;
  }
}

void DequantBlockIQ2_XXS(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint8_t* qs = block + 2;
  for (int g = 0; g < 8; ++g) {
    uint32_t a, b;
    std::memcpy(&a, qs + 8 * g, 4);
    std::memcpy(&b, qs + 8 * g + 4, 4);
    const float db = d * (0.5f + static_cast<float>(b >> 28)) * 0.25f;
    for (int k = 0; k < 4; ++k) {
      const uint64_t grid = kIq2xxsGrid[(a >> (8 * k)) & 0xff];
      const uint8_t signs = kIq2Signs[(b >> (7 * k)) & 127];
      for (int j = 0; j < 8; ++j) {
        const float mag = static_cast<float>((grid >> (8 * j)) & 0xff);
        out[32 * g + 8 * k + j] = db * mag * ((signs >> j) & 1 ? -1.0f : 1.0f);
      }
    }
  }
}

void DequantBlockQ8_K(const uint8_t* block, float* out) {
  const float d = LoadFloat(block);
  const int8_t* qs = reinterpret_cast<const int8_t*>(block + 4);
  for (int i = 0; i < kQK_K; ++i) out[i] = d * static_cast<float>(qs[i]);
}

void DequantBlockQ3_K(const uint8_t* block, float* out) {
  const uint8_t* hmask = block;
  const uint8_t* qs = block + 32;
  int sc[16];
  Q3KScales(block + 96, sc);
  const float d = LoadHalf(block + 108);
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 4; ++s) {
      const int bit = 4 * h + s;
      for (int part = 0; part < 2; ++part) {
        const float dl = d * static_cast<float>(sc[8 * h + 2 * s + part]);
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          const int q = ((qs[32 * h + l] >> (2 * s)) & 3) - ((hmask[l] >> bit) & 1 ? 0 : 4);
          out[128 * h + 32 * s + l] = dl * static_cast<float>(q);
        }
      }
    }
  }
}

void DequantBlockQ5_K(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float dmin = LoadHalf(block + 2);
  const uint8_t* scales = block + 4;
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + 48;
  for (int p = 0; p < 4; ++p) {
    int sc0, mn0, sc1, mn1;
    Q4KScaleMin(scales, 2 * p, &sc0, &mn0);
    Q4KScaleMin(scales, 2 * p + 1, &sc1, &mn1);
    const float d0 = d * static_cast<float>(sc0), m0 = dmin * static_cast<float>(mn0);
    const float d1 = d * static_cast<float>(sc1), m1 = dmin * static_cast<float>(mn1);
    const uint8_t* q = qs + 32 * p;
    for (int l = 0; l < 32; ++l) {
      const int lo = (q[l] & 15) + ((qh[l] >> (2 * p)) & 1) * 16;
      const int hi = (q[l] >> 4) + ((qh[l] >> (2 * p + 1)) & 1) * 16;
      out[64 * p + l] = d0 * static_cast<float>(lo) - m0;
      out[64 * p + 32 + l] = d1 * static_cast<float>(hi) - m1;
    }
  }
}

void DequantBlockQ6_K(const uint8_t* block, float* out) {
  const float d = LoadHalf(block + 208);
  const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = block + 64 * h;
    const uint8_t* qh = block + 128 + 32 * h;
    const int8_t* sc = scales + 8 * h;
    float* o = out + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q0 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q1 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      o[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q0);
      o[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q1);
      o[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q2);
      o[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q3);
    }
  }
}

void DequantBlockMXFP4(const uint8_t* block, float* out) {
  const float d = Mxfp4HalfScale(block[0]);
  const uint8_t* qs = block + 1;
  for (int j = 0; j < kQKMxfp4 / 2; ++j) {
    out[j] = static_cast<float>(kMxfp4Doubled[qs[j] & 15]) * d;
    out[j + kQKMxfp4 / 2] = static_cast<float>(kMxfp4Doubled[qs[j] >> 4]) * d;
  }
}

// GGML's dequantize_row_iq2_xs: db = (f16(d) * (0.5 + ls)) * 0.25, value = (db * grid) * sign.
void DequantBlockIQ2_XS(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint8_t* scales = block + 66;
  for (int g = 0; g < 8; ++g) {
    const float db[2] = {d * (0.5f + static_cast<float>(scales[g] & 15)) * 0.25f,
                         d * (0.5f + static_cast<float>(scales[g] >> 4)) * 0.25f};
    for (int k = 0; k < 4; ++k) {
      uint16_t q;
      std::memcpy(&q, block + 2 + 2 * (4 * g + k), 2);
      const uint64_t grid = kIq2xsGrid[q & 511];
      const uint8_t signs = kIq2Signs[q >> 9];
      for (int j = 0; j < 8; ++j) {
        const float mag = static_cast<float>((grid >> (8 * j)) & 0xff);
        out[32 * g + 8 * k + j] = db[k / 2] * mag * ((signs >> j) & 1 ? -1.0f : 1.0f);
      }
    }
  }
}

// GGML's dequantize_row_iq1_m: dl = f16(scale) * (2s + 1), value = dl * (grid + delta).
void DequantBlockIQ1_M(const uint8_t* block, float* out) {
  const float d = Iq1mScale(block + 48);
  for (int g = 0; g < 8; ++g) {
    int ls[2];
    Iq1mGroupScales(block + 48, g, &ls[0], &ls[1]);
    for (int k = 0; k < 4; ++k) {
      bool neg;
      const uint64_t grid = kIq1sGrid[Iq1mRun(block, g, k, &neg)];
      const float delta = neg ? -kIq1Delta : kIq1Delta;
      const float dl = d * static_cast<float>(ls[k / 2]);
      for (int j = 0; j < 8; ++j) {
        const auto v = static_cast<int8_t>((grid >> (8 * j)) & 0xff);
        out[32 * g + 8 * k + j] = dl * (static_cast<float>(v) + delta);
      }
    }
  }
}

namespace {
uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
}  // namespace

// GGML's dequantize_row_iq3_xxs: db = (f16(d) * (0.5 + ls)) * 0.5, value = (db * grid) * sign.
void DequantBlockIQ3_XXS(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint8_t* qs = block + 2;
  for (int g = 0; g < 8; ++g) {
    const uint32_t w = LoadU32(block + 66 + 4 * g);
    const float db = d * (0.5f + static_cast<float>(w >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint8_t signs = kIq2Signs[(w >> (7 * l)) & 127];
      for (int j = 0; j < 8; ++j) {
        const uint32_t grid = kIq3xxsGrid[qs[8 * g + 2 * l + j / 4]];
        const float mag = static_cast<float>((grid >> (8 * (j % 4))) & 0xff);
        out[32 * g + 8 * l + j] = db * mag * ((signs >> j) & 1 ? -1.0f : 1.0f);
      }
    }
  }
}

// GGML's dequantize_row_iq3_s: db = f16(d) * (1 + 2 s), value = (db * grid) * sign.
void DequantBlockIQ3_S(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint8_t* qs = block + 2;
  const uint8_t* qh = block + 66;
  const uint8_t* signs = block + 74;
  const uint8_t* scales = block + 106;
  for (int g = 0; g < 8; ++g) {
    const float db = d * static_cast<float>(1 + 2 * ((scales[g / 2] >> (4 * (g % 2))) & 15));
    for (int l = 0; l < 4; ++l) {
      const int i1 = qs[8 * g + 2 * l] | ((qh[g] << (8 - 2 * l)) & 256);
      const int i2 = qs[8 * g + 2 * l + 1] | ((qh[g] << (7 - 2 * l)) & 256);
      for (int j = 0; j < 8; ++j) {
        const uint32_t grid = kIq3sGrid[j < 4 ? i1 : i2];
        const float mag = static_cast<float>((grid >> (8 * (j % 4))) & 0xff);
        out[32 * g + 8 * l + j] = db * mag * ((signs[4 * g + l] >> j) & 1 ? -1.0f : 1.0f);
      }
    }
  }
}

// GGML's dequantize_row_iq2_s: db = (f16(d) * (0.5 + ls)) * 0.25, value = (db * grid) * sign.
void DequantBlockIQ2_S(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint8_t* qs = block + 2;
  const uint8_t* signs = block + 34;
  const uint8_t* qh = block + 66;
  const uint8_t* scales = block + 74;
  for (int g = 0; g < 8; ++g) {
    const float db[2] = {d * (0.5f + static_cast<float>(scales[g] & 15)) * 0.25f,
                         d * (0.5f + static_cast<float>(scales[g] >> 4)) * 0.25f};
    for (int l = 0; l < 4; ++l) {
      const uint64_t grid = kIq2sGrid[qs[4 * g + l] | ((qh[g] << (8 - 2 * l)) & 0x300)];
      for (int j = 0; j < 8; ++j) {
        const float mag = static_cast<float>((grid >> (8 * j)) & 0xff);
        out[32 * g + 8 * l + j] = db[l / 2] * mag * ((signs[4 * g + l] >> j) & 1 ? -1.0f : 1.0f);
      }
    }
  }
}

// GGML's dequantize_row_iq1_s: dl = f16(d) * (2s + 1), value = dl * (grid + delta).
void DequantBlockIQ1_S(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint8_t* qs = block + 2;
  for (int g = 0; g < 8; ++g) {
    const uint16_t qh = LoadU16(block + 34 + 2 * g);
    const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
    const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
    for (int l = 0; l < 4; ++l) {
      const uint64_t grid = kIq1sGrid[qs[4 * g + l] | (((qh >> (3 * l)) & 7) << 8)];
      for (int j = 0; j < 8; ++j) {
        const auto v = static_cast<int8_t>((grid >> (8 * j)) & 0xff);
        out[32 * g + 8 * l + j] = dl * (static_cast<float>(v) + delta);
      }
    }
  }
}

// GGML's dequantize_row_iq4_nl: value = f16(d) * kvalues_iq4nl[nibble].
void DequantBlockIQ4_NL(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  for (int j = 0; j < kQK4_NL / 2; ++j) {
    out[j] = d * static_cast<float>(kIq4nlValues[block[2 + j] & 15]);
    out[j + kQK4_NL / 2] = d * static_cast<float>(kIq4nlValues[block[2 + j] >> 4]);
  }
}

// GGML's dequantize_row_iq4_xs: dl = f16(d) * (ls - 32), value = dl * kvalues_iq4nl[nibble].
void DequantBlockIQ4_XS(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint16_t scales_h = LoadU16(block + 2);
  for (int g = 0; g < 8; ++g) {
    const int ls = ((block[4 + g / 2] >> (4 * (g % 2))) & 15) | (((scales_h >> (2 * g)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    const uint8_t* qs = block + 8 + 16 * g;
    for (int j = 0; j < 16; ++j) {
      out[32 * g + j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 15]);
      out[32 * g + 16 + j] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
    }
  }
}

BlockDequantFn ScalarBlockDequant(DType type) {
  switch (type) {
    case DType::kQ8_0:
      return DequantBlockQ8_0;
    case DType::kQ2_K:
      return DequantBlockQ2_K;
    case DType::kQ4_K:
      return DequantBlockQ4_K;
    case DType::kIQ2_XXS:
      return DequantBlockIQ2_XXS;
    case DType::kQ8_K:
      return DequantBlockQ8_K;
    case DType::kQ3_K:
      return DequantBlockQ3_K;
    case DType::kQ5_K:
      return DequantBlockQ5_K;
    case DType::kQ6_K:
      return DequantBlockQ6_K;
    case DType::kMXFP4:
      return DequantBlockMXFP4;
    case DType::kIQ2_XS:
      return DequantBlockIQ2_XS;
    case DType::kIQ1_M:
      return DequantBlockIQ1_M;
    case DType::kIQ3_XXS:
      return DequantBlockIQ3_XXS;
    case DType::kIQ3_S:
      return DequantBlockIQ3_S;
    case DType::kIQ2_S:
      return DequantBlockIQ2_S;
    case DType::kIQ1_S:
      return DequantBlockIQ1_S;
    case DType::kIQ4_NL:
      return DequantBlockIQ4_NL;
    case DType::kIQ4_XS:
      return DequantBlockIQ4_XS;
    default:
      return nullptr;
  }
}

}  // namespace internal

namespace {

Status CheckRow(DType type, int64_t n, const char* what) {
  const DTypeInfo* info = FindDTypeInfo(static_cast<uint32_t>(type));
  if (!info)
    return InvalidArgument("{}: unknown tensor type id {}", what, static_cast<uint32_t>(type));
  if (!info->computable) return Unsupported("{}: type {} is not supported", what, info->name);
  if (n < 0 || n % info->block_size != 0)
    return InvalidArgument("{}: row of {} values is not a whole number of {} blocks ({} values)",
                           what, n, info->name, info->block_size);
  return Status::Ok();
}

// GGML's Q8_0 weight quantizer: scale amax/127 stored as f16, quants rounded half away from
// zero against the unrounded fp32 scale.
void QuantizeQ8_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0, dst += sizeof(BlockQ8_0)) {
    float amax = 0.0f;
    for (int i = 0; i < kQK8_0; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = F32ToF16(d);
    std::memcpy(dst, &dh, 2);
    for (int i = 0; i < kQK8_0; ++i) {
      const float v = std::clamp(std::round(x[i] * id), -128.0f, 127.0f);
      dst[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(v));
    }
  }
}

}  // namespace

Status DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  FLASHKV_RETURN_IF_ERROR(CheckRow(type, n, "dequantize"));
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return Status::Ok();
    case DType::kF16:
      F16ToF32Row(static_cast<const uint16_t*>(src), dst, n);
      return Status::Ok();
    case DType::kBF16:
      BF16ToF32Row(static_cast<const uint16_t*>(src), dst, n);
      return Status::Ok();
    default:
      break;
  }
  const internal::BlockDequantFn fn = internal::FastBlockDequant(type);
  if (!fn) return Unsupported("dequantize: no kernel for type {}", GetDTypeInfo(type).name);
  const DTypeInfo& info = GetDTypeInfo(type);
  const uint8_t* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / info.block_size; ++b)
    fn(p + b * info.block_bytes, dst + b * info.block_size);
  return Status::Ok();
}

bool CanQuantize(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ2_K:
    case DType::kQ4_K:
    case DType::kQ8_K:
      return true;
    default:
      return false;
  }
}

Status QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  FLASHKV_RETURN_IF_ERROR(CheckRow(type, n, "quantize"));
  uint8_t* out = static_cast<uint8_t*>(dst);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case DType::kF16:
      F32ToF16Row(src, static_cast<uint16_t*>(dst), n);
      break;
    case DType::kBF16:
      F32ToBF16Row(src, static_cast<uint16_t*>(dst), n);
      break;
    case DType::kQ8_0:
      QuantizeQ8_0(src, out, n);
      break;
    case DType::kQ2_K:
      for (int64_t b = 0; b < n / kQK_K; ++b)
        internal::QuantizeBlockQ2_K(src + b * kQK_K, out + b * sizeof(BlockQ2_K));
      break;
    case DType::kQ4_K:
      for (int64_t b = 0; b < n / kQK_K; ++b)
        internal::QuantizeBlockQ4_K(src + b * kQK_K, out + b * sizeof(BlockQ4_K));
      break;
    case DType::kQ8_K: {
      // BlockQ8_K has float alignment; quantize through an aligned temporary.
      BlockQ8_K blk;
      for (int64_t b = 0; b < n / kQK_K; ++b) {
        QuantizeActQ8_K(src + b * kQK_K, &blk, kQK_K);
        std::memcpy(out + b * sizeof(BlockQ8_K), &blk, sizeof(blk));
      }
      break;
    }
    default:
      return Unsupported("quantize: cannot quantize to {}", GetDTypeInfo(type).name);
  }
  return Status::Ok();
}

}  // namespace flashkv
