// `flashkv convert`: a Hugging Face DeepSeek V4 checkpoint (config.json + safetensors) to a
// DS4 GGUF that both flashkv and antirez's ds4 layout expect. Must not: run the model.
//
// Pipeline: LoadHfConfig -> Ds4Hparams; Ds4Layout lists the GGUF tensors; PlanHfTensors
// finds each one's checkpoint source (FP8 / FP4 weights dequantized per hf_dequant.h) (one error
// lists every missing / unmapped tensor); each tensor is then read, assembled and encoded on demand
// while the writer streams the file, so only one tensor is in memory at a time.
#pragma once

#include <string>
#include <vector>

#include "convert/ds4_layout.h"
#include "util/status.h"

namespace flashkv {

struct ConvertOptions {
  std::string hf_dir;          // config.json + *.safetensors (or a model.safetensors.index.json)
  std::string out_path;        // the .gguf to write (atomically)
  std::string tokenizer_path;  // tokenizer.json to embed
  // kF32 keeps every value exact (the HF-parity reference); kF16 / kQ8_0 follow ds4's types
  // (block types fall back to F16 where a row is not a whole number of blocks).
  Ds4WeightScheme scheme = Ds4WeightScheme::kF32;
  // Routed experts that the checkpoint stores FP4-packed (the official V4 / 0731 releases)
  // are written as MXFP4 blocks unchanged instead of being requantized to the scheme's type,
  // as ds4's 0731 files do. Refused, naming the tensor, when an expert tensor is not FP4.
  bool keep_mxfp4_experts = false;
  std::string name;  // general.name; the directory name when empty
  bool show_progress = true;
};

struct ConvertReport {
  size_t tensors = 0;
  uint64_t bytes = 0;              // file size
  std::vector<std::string> notes;  // config defaults, vocab fitting, type fallbacks
};

Expected<ConvertReport> ConvertHfCheckpoint(const ConvertOptions& options);

// One tensor's f32 values [n_rows, ne[0]] encoded as `type` rows (F32, F16, BF16 or any
// type with a quantizer).
Expected<std::vector<uint8_t>> EncodeTensorRows(const std::vector<float>& values, DType type,
                                                const std::vector<uint64_t>& ne);

}  // namespace flashkv
