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
  // kFast: the official formulas with the backend's tensor-core float kernels in prefill
  // chunks (backend/backend.h FloatPath; `--numerics fast`).
  FloatPath float_path = FloatPath::kExact;
};

Expected<NumericsMode> ParseNumericsMode(std::string_view s);  // "hf" | "official"
Expected<ActQuantMode> ParseActQuantMode(std::string_view s);  // "off" | "q8"
std::string_view NumericsModeName(NumericsMode m);
// The --numerics flag: "hf", "official" or "fast" (official formulas, FloatPath::kFast).
Status ApplyNumericsFlag(std::string_view s, ModelOptions* options);
// The numerics as the flag names them: "hf", "official" or "fast" ("hf-fast" for the hf
// formulas on the fast path, which only code builds). Snapshots carry it, so a state made
// on the fast path is never restored into an exact session (docs/KV_FORMAT.md).
std::string_view NumericsName(const ModelOptions& options);
std::string_view ActQuantModeName(ActQuantMode m);

// Official numerics need FP8 blocks of 64 over the no-RoPE dims and FP4 blocks of 32 over
// a power-of-two indexer row; an error says which shape does not allow it.
Status CheckOfficialNumericsSupported(const ModelConfig& config);
// The defaults for a model: official + q8 when the shapes allow official numerics (every
// real ds4 GGUF), otherwise hf + off.
ModelOptions DefaultModelOptions(const ModelConfig& config);

}  // namespace flashkv
