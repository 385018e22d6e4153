#include "convert/hf_dequant.h"

#include <cmath>

#include <fmt/format.h>

#include "tensor/quant_blocks.h"

namespace flashkv {
namespace {

constexpr uint64_t kFp8Block = 128;
constexpr uint64_t kFp4Block = 32;
constexpr uint8_t kE8M0Nan = 0xFF;

// E2M1 magnitudes by the low three bits of a code; bit 3 is the sign.
constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

std::string ShapeText(const std::vector<uint64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `<name minus .weight>.scale` (V4) or `<name>_scale_inv` (V3), whichever is present.
const SafetensorsTensor* FindScale(const SafetensorsCheckpoint& ck, const std::string& name,
                                   std::string* scale_name) {
  std::vector<std::string> candidates;
  if (EndsWith(name, ".weight")) candidates.push_back(name.substr(0, name.size() - 7) + ".scale");
  candidates.push_back(name + "_scale_inv");
  for (const std::string& c : candidates) {
    if (const SafetensorsTensor* t = ck.Find(c)) {
      *scale_name = c;
      return t;
    }
  }
  return nullptr;
}

// The first row/block whose scale byte is E8M0's NaN, as an error; OK otherwise.
Status CheckNoNanScale(const HfWeight& w) {
  for (uint64_t i = 0; i < w.scale->numel(); ++i)
    if (w.scale->data[i] == kE8M0Nan)
      return Corrupt("{}: scale '{}' entry {} is 0xFF (E8M0 NaN)", w.weight->name, w.scale_name, i);
  return Status::Ok();
}

}  // namespace

Expected<HfWeight> InspectHfWeight(const SafetensorsCheckpoint& ck, const std::string& name) {
  HfWeight w;
  w.weight = ck.Find(name);
  if (!w.weight) return NotFound("checkpoint tensor '{}' not found", name);
  w.shape = w.weight->shape;
  const StDType dt = w.weight->dtype;
  if (dt != StDType::kF8_E4M3 && dt != StDType::kI8 && dt != StDType::kU8) return w;

  w.scale = FindScale(ck, name, &w.scale_name);
  if (dt == StDType::kF8_E4M3) {
    w.format = HfWeightFormat::kFp8Block;
    if (!w.scale)
      return Corrupt("FP8 tensor '{}' has no block scale ('{}.scale' or '{}_scale_inv')", name,
                     EndsWith(name, ".weight") ? name.substr(0, name.size() - 7) : name, name);
    if (w.scale->dtype != StDType::kF8_E8M0 && w.scale->dtype != StDType::kF32)
      return Corrupt("FP8 tensor '{}': scale '{}' is {}, expected F8_E8M0 or F32", name,
                     w.scale_name, StDTypeName(w.scale->dtype));
    if (w.shape.size() != 2)
      return Unsupported("FP8 tensor '{}' is {}: only 2-D FP8 weights are supported", name,
                         ShapeText(w.shape));
    const std::vector<uint64_t> want = {(w.shape[0] + kFp8Block - 1) / kFp8Block,
                                        (w.shape[1] + kFp8Block - 1) / kFp8Block};
    if (w.scale->shape != want)
      return Corrupt("FP8 tensor '{}' {}: scale '{}' is {}, expected {} (128x128 blocks)", name,
                     ShapeText(w.shape), w.scale_name, ShapeText(w.scale->shape), ShapeText(want));
    return w;
  }

  // I8 / U8: FP4 pairs, which only make sense with their E8M0 block scales.
  w.format = HfWeightFormat::kFp4Packed;
  if (!w.scale)
    return Corrupt("{} tensor '{}' has no scale tensor: FP4-packed weights need '{}'",
                   StDTypeName(dt), name,
                   EndsWith(name, ".weight") ? name.substr(0, name.size() - 7) + ".scale"
                                             : name + "_scale_inv");
  if (w.scale->dtype != StDType::kF8_E8M0)
    return Corrupt("FP4 tensor '{}': scale '{}' is {}, expected F8_E8M0", name, w.scale_name,
                   StDTypeName(w.scale->dtype));
  if (w.shape.empty())
    return Corrupt("FP4 tensor '{}' is a scalar; packed weights have rows", name);
  w.shape.back() *= 2;
  if (w.shape.back() % kFp4Block != 0)
    return Corrupt(
        "FP4 tensor '{}' {}: a row of {} values is not a whole number of 32-value "
        "blocks",
        name, ShapeText(w.weight->shape), w.shape.back());
  std::vector<uint64_t> want = w.shape;
  want.back() /= kFp4Block;
  if (w.scale->shape != want)
    return Corrupt(
        "FP4 tensor '{}' {} ({} unpacked): scale '{}' is {}, expected {} (one per 32 "
        "values of a row)",
        name, ShapeText(w.weight->shape), ShapeText(w.shape), w.scale_name,
        ShapeText(w.scale->shape), ShapeText(want));
  return w;
}

Expected<std::vector<float>> DequantHfWeight(const HfWeight& w) {
  switch (w.format) {
    case HfWeightFormat::kPlain:
      return w.weight->ToF32();
    case HfWeightFormat::kFp8Block: {
      FLASHKV_ASSIGN_OR_RETURN(std::vector<float> v, w.weight->ToF32());
      FLASHKV_ASSIGN_OR_RETURN(std::vector<float> scale, w.scale->ToF32());
      const uint64_t rows = w.shape[0], cols = w.shape[1];
      const uint64_t scols = w.scale->shape[1];
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t c = 0; c < cols; ++c)
          v[r * cols + c] *= scale[(r / kFp8Block) * scols + c / kFp8Block];
      for (float s : scale)
        if (std::isnan(s))
          return Corrupt("FP8 tensor '{}': scale '{}' holds a NaN", w.weight->name, w.scale_name);
      return v;
    }
    case HfWeightFormat::kFp4Packed: {
      FLASHKV_RETURN_IF_ERROR(CheckNoNanScale(w));
      const uint64_t n = w.weight->numel() * 2;
      std::vector<float> v(n);
      const uint8_t* q = w.weight->data;
      const uint8_t* e = w.scale->data;
      for (uint64_t i = 0; i < n; ++i) {
        const uint8_t code = (q[i / 2] >> (4 * (i & 1))) & 15;
        const float mag = std::ldexp(kE2M1[code & 7], static_cast<int>(e[i / kFp4Block]) - 127);
        v[i] = (code & 8) ? -mag : mag;
      }
      return v;
    }
  }
  return Internal("unhandled weight format for '{}'", w.weight->name);
}

Expected<std::vector<uint8_t>> Fp4ToMxfp4(const HfWeight& w) {
  if (w.format != HfWeightFormat::kFp4Packed)
    return InvalidArgument("'{}' is {}, not FP4-packed: it has no MXFP4 form without requantizing",
                           w.weight->name, StDTypeName(w.weight->dtype));
  FLASHKV_RETURN_IF_ERROR(CheckNoNanScale(w));
  const uint64_t blocks = w.scale->numel();
  std::vector<uint8_t> out(blocks * sizeof(BlockMXFP4));
  const uint8_t* q = w.weight->data;
  for (uint64_t b = 0; b < blocks; ++b) {
    // Block b covers packed bytes [16b, 16b + 16): element k of the block sits in byte k / 2.
    const uint8_t* src = q + b * (kFp4Block / 2);
    auto code = [&](int k) { return static_cast<uint8_t>((src[k / 2] >> (4 * (k & 1))) & 15); };
    uint8_t* dst = out.data() + b * sizeof(BlockMXFP4);
    dst[0] = w.scale->data[b];
    for (int j = 0; j < kQKMxfp4 / 2; ++j)
      dst[1 + j] = static_cast<uint8_t>(code(j) | (code(j + kQKMxfp4 / 2) << 4));
  }
  return out;
}

}  // namespace flashkv
