// The quantized weight formats of DeepSeek's official V4 checkpoints (V4-Flash, 0731), read
// per their public definition (DeepSeek's inference code: model.py / kernel.py / convert.py):
// Must not: know GGUF names or model structure (hf_tensor_map decides which tensor is which).
//
// - FP8: an F8_E4M3 weight [rows, cols] times one scale per 128 x 128 block, the scale tensor
//   `<name minus .weight>.scale` (F8_E8M0, V4) or `<name>_scale_inv` (F32, V3 style), shape
//   [ceil(rows / 128), ceil(cols / 128)]. value = e4m3 * scale, exact in f32.
// - FP4 (the routed experts): an I8 (or U8) tensor [..., cols / 2], byte b of a row holding
//   logical element 2b in its low nibble and 2b + 1 in its high nibble, each an E2M1 code
//   (bit 3 sign; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6); scale `.scale` F8_E8M0 [..., cols / 32],
//   one power of two 2^(e - 127) per 32 consecutive elements of a row. value = e2m1 * 2^(e-127),
//   exact in f32. e = 255 (E8M0's NaN) is refused.
//
// The FP4 blocks are GGUF's MXFP4 blocks with the nibbles reordered (GGUF: element j low,
// j + 16 high; same codes, same scale byte, GGML's doubled table times 2^(e - 128) gives the
// same value), so they can be kept as MXFP4 without requantizing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/safetensors_checkpoint.h"
#include "util/status.h"

namespace flashkv {

enum class HfWeightFormat {
  kPlain,      // F32 / F16 / BF16 / F8_E8M0, taken as they are
  kFp8Block,   // F8_E4M3 with 128 x 128 block scales
  kFp4Packed,  // I8 / U8 E2M1 pairs with 32-element E8M0 scales
};

struct HfWeight {
  HfWeightFormat format = HfWeightFormat::kPlain;
  const SafetensorsTensor* weight = nullptr;
  const SafetensorsTensor* scale = nullptr;  // null for kPlain
  std::string scale_name;
  std::vector<uint64_t> shape;  // logical (unpacked) PyTorch shape
};

// Finds `name` and its scale and checks that they fit together. Errors name the tensor and
// the reason: no scale, a scale of the wrong dtype or shape, an FP4 row that is not a whole
// number of 32-element blocks, an I8 / U8 tensor without a scale.
Expected<HfWeight> InspectHfWeight(const SafetensorsCheckpoint& ck, const std::string& name);

// The logical values, row-major in `shape`, as f32 (exact for every format).
Expected<std::vector<float>> DequantHfWeight(const HfWeight& w);

// An FP4 weight as GGUF MXFP4 rows (shape.back() / 32 blocks of 17 bytes per row), bit for
// bit the same values as DequantHfWeight (E2M1's -0 becomes +0, as GGML decodes it).
Expected<std::vector<uint8_t>> Fp4ToMxfp4(const HfWeight& w);

}  // namespace flashkv
