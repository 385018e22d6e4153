// `flashkv make-tiny --preset flash[:LAYERS]`: DeepSeek V4 Flash's real widths (n_embd 4096,
// 64 heads of 512, 256 experts of 2048, top-6; the first LAYERS of its 43-layer schedule) in
// ds4's exact layout and q2 mix, so benchmarks can run from a real file through the loader as
// users do (43 layers: ~81 GB). The blocks are make-tiny's random ones: this preset only
// fixes the shape, and TinyModelDirectory says where every tensor lands without writing it.
// Must not: generate tensor data (tiny_model.cpp does) or know the GGUF encoding beyond the
// data section's alignment.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "convert/ds4_hparams.h"
#include "tensor/dtype.h"
#include "util/status.h"

namespace flashkv {

inline constexpr uint32_t kFlashLayers = 43;

// "flash" or "flash:N" (any N: FlashWidths checks the range).
bool IsFlashPreset(std::string_view preset);

// Sets Flash's widths and layer schedule (compress ratios 0, 0, then 4 and 128 alternating;
// the first three layers hash-routed) on `hp`, which holds the constants every DS4 shape
// shares. LAYERS must be 1..43.
Status SetFlashWidths(std::string_view preset, Ds4Hparams& hp);

// One tensor of a make-tiny file as the GGUF directory lists it.
struct TinyTensorEntry {
  std::string name;
  DType type;
  std::vector<uint64_t> ne;
  uint64_t offset;  // relative to the data section, aligned as WriteDs4Metadata sets
  uint64_t nbytes;
};

// The tensors AddTinyModel writes for `hp`, in file order, with their data offsets.
Expected<std::vector<TinyTensorEntry>> TinyModelDirectory(const Ds4Hparams& hp);

}  // namespace flashkv
