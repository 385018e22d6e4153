// The two RoPE parameter sets of a DeepSeek V4 model (docs/DS4_MODEL.md §4.2), in the
// parametrisation of backend/rope_params.h:
// - main (sliding-only layers): plain, base θ_m;
// - compress (every RoPE in a CSA/HCA layer, including its compressor and indexer): YaRN
//   with base θ_c, scale 1/s, the ramp between the correction dims of β_fast and β_slow,
//   and no magnitude scaling (mscale is ds4's float cancellation, ≈ 1). With s <= 1 it is
//   the plain parameter set with θ_c.
// Must not: apply the rotation (Backend::Rope does).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/rope_params.h"
#include "model/model_config.h"

namespace flashkv {

// YaRN ramp bounds in pairs: lo = max(0, floor(cd(β_fast))), hi = min(n_rot − 1,
// ceil(cd(β_slow))), cd(β) = n_rot·ln(L0/(2πβ)) / (2 ln θ), evaluated in float as ds4 does.
void YarnCorrectionDims(int n_rot, uint64_t orig_ctx, float base, float beta_fast, float beta_slow,
                        float* lo, float* hi);

RopeParams PlainRope(int n_rot, float base);
RopeParams YarnRope(int n_rot, float base, float factor, uint64_t orig_ctx, float beta_fast,
                    float beta_slow);

RopeParams MainRope(const ModelConfig& c);
RopeParams CompressRope(const ModelConfig& c);

// The effective angular frequency of every pair (the angle at position 1): ω_i =
// θ^(−2i/n_rot)·((1 − γ_i) + γ_i/s). For tests and documentation.
std::vector<float> RopeFrequencies(const RopeParams& p);

}  // namespace flashkv
