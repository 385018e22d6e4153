// Runtime choices of how the forward pass computes, independent of the model file.
// Must not: hold shapes (ModelConfig) or state (KvState).
#pragma once

#include <string>
#include <string_view>

#include "backend/backend.h"
#include "model/model_config.h"
#include "util/status.h"

namespace flashkv {

// kHf: plain fp32 everywhere (HF transformers parity). kOfficial: as ds4 / the official
// model compute: FP8 E4M3 round trip of the no-RoPE part of raw and compressed KV rows,
// Hadamard + FP4 on indexer queries and rows, F16 rounding of every stored cache row
// (docs/DS4_MODEL.md §9 #1, #2, #5 and §13).
enum class NumericsMode { kHf, kOfficial };

struct ModelOptions {
  NumericsMode numerics = NumericsMode::kOfficial;
  ActQuantMode act_quant = ActQuantMode::kQ8;
};

Expected<NumericsMode> ParseNumericsMode(std::string_view s);  // "hf" | "official"
Expected<ActQuantMode> ParseActQuantMode(std::string_view s);  // "off" | "q8"
std::string_view NumericsModeName(NumericsMode m);
std::string_view ActQuantModeName(ActQuantMode m);

// Official numerics need FP8 blocks of 64 over the no-RoPE dims and FP4 blocks of 32 over
// a power-of-two indexer row; an error says which shape does not allow it.
Status CheckOfficialNumericsSupported(const ModelConfig& config);
// The defaults for a model: official + q8 when the shapes allow official numerics (every
// real ds4 GGUF), otherwise hf + off.
ModelOptions DefaultModelOptions(const ModelConfig& config);

}  // namespace flashkv
