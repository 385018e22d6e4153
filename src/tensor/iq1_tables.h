// The IQ1_S / IQ1_M codebook: GGML's published iq1s_grid, which GGUF files quantized as IQ1_M
// index. Must not: hold kernels. Data, apart from the code that reads it.
#pragma once

#include <cstdint>

namespace flashkv {

// 2048 points; byte j of entry i is value j as an int8 in {-1, 0, +1} (0xff, 0x00, 0x01). An
// IQ1_M value adds a per-8 shift of ±kIq1Delta to the grid value before scaling.
extern const uint64_t kIq1sGrid[2048];

// GGML's IQ1M_DELTA (= IQ1S_DELTA): the shift, exactly 1/8.
inline constexpr float kIq1Delta = 0.125f;

}  // namespace flashkv
