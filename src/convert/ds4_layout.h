// The tensor directory of a DS4 GGUF for given hyperparameters: every tensor name, its GGML
// shape and its role, in the order antirez's files list them; and the dtype each role gets
// under a weight scheme (ds4's q2 scheme, or uniform f32 / f16 / q8_0 for conversions).
// Must not: produce tensor data (convert and make-tiny fill these slots).
//
// The engine has its own binding table (model/); this is the writer's side, kept equal to
// the fixture `ds4-tiny.gguf` by a test.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "convert/ds4_hparams.h"
#include "tensor/dtype.h"
#include "util/status.h"

namespace flashkv {

// What a tensor is, which decides its dtype. Comments give ds4's type.
enum class Ds4Role {
  kF32Vector,     // norms, sinks, HC scale/base, router bias: F32
  kDense,         // embedding, HC fn, compressor, indexer, router: F16
  kProjection,    // attention projections, shared expert, output head: Q8_0
  kExpertGateUp,  // routed experts' gate and up: IQ2_XXS (or Q2_K/Q4_K)
  kExpertDown,    // routed experts' down: Q2_K (or Q4_K)
  kTokenExperts,  // hash routing table tid2eid: I32
};

struct Ds4TensorSpec {
  std::string name;          // "blk.3.attn_q_a.weight"
  std::vector<uint64_t> ne;  // GGML order, ne[0] contiguous
  Ds4Role role;
  int layer;              // -1 for the global tensors
  std::string_view part;  // name without "blk.N." (the HF map keys on it)
};

// Every tensor, in the order of the DS4 files: token_embd, then per layer HC, attention,
// compressor (ratio != 0), indexer (ratio == 4), FFN (router, bias for top-k layers, experts,
// shared expert, tid2eid for hash layers), then the output head.
std::vector<Ds4TensorSpec> Ds4Layout(const Ds4Hparams& hp);

enum class Ds4WeightScheme {
  kF32,   // everything F32 (tid2eid I32): the exact reference for HF parity
  kF16,   // matrices F16, vectors F32
  kQ8_0,  // ds4's types with Q8_0 routed experts
  kQ2,    // ds4's shipped q2 files: IQ2_XXS gate/up, Q2_K down
};

// "f32", "f16", "q8_0", "q2"; an error naming the accepted spellings otherwise.
Expected<Ds4WeightScheme> ParseDs4WeightScheme(std::string_view s);
std::string_view Ds4WeightSchemeName(Ds4WeightScheme s);

// The dtype for a tensor under a scheme. A block type whose block does not divide ne[0]
// (tiny HF configs: q_lora_rank 48) falls back to F16, reported through `fell_back`.
DType Ds4TensorType(const Ds4TensorSpec& spec, Ds4WeightScheme scheme, bool* fell_back = nullptr);

}  // namespace flashkv
