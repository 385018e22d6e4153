// RoPE frequency tables (spec §4.2): one angular frequency ω_i per interleaved pair of
// the n_rot trailing channels; the rotation angle at position p is p·ω_i.
// - main (sliding-only layers): ω_i = θ_m^(−2i/n_rot);
// - compress (every RoPE in a CSA/HCA layer, including its compressor and indexer): YaRN
//   with base θ_c: ω_i = θ_c^(−2i/n_rot) · ((1 − γ_i) + γ_i / s), γ_i a ramp between the
//   correction dims of β_fast and β_slow; no magnitude scaling. With s <= 1 it is the
//   plain table with θ_c.
// Must not: apply the rotation (Backend::Rope does).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace flashkv {

// [n_rot / 2] plain frequencies.
std::vector<float> PlainRopeFrequencies(int n_rot, double base);

// [n_rot / 2] YaRN frequencies. Also reports the ramp bounds (lo, hi) when asked.
std::vector<float> YarnRopeFrequencies(int n_rot, double base, double factor, uint64_t orig_ctx,
                                       double beta_fast, double beta_slow, double* lo = nullptr,
                                       double* hi = nullptr);

// The table a layer's RoPE uses.
std::vector<float> MainRopeFrequencies(const ModelConfig& c);
std::vector<float> CompressRopeFrequencies(const ModelConfig& c);

}  // namespace flashkv
