// The IQ3_XXS and IQ3_S codebooks: GGML's published tables, which GGUF files quantized as
// IQ3_XXS / IQ3_S index. Must not: hold kernels. Data, apart from the code that reads it.
#pragma once

#include <cstdint>

namespace flashkv {

// 256 points; byte j of entry i is the magnitude of value j (4, 12, .., 52 and 62). The signs
// are stored separately (kIq2Signs, as IQ2_XXS).
extern const uint32_t kIq3xxsGrid[256];

// IQ3_S's 512 points, bytes from {1, 3, 5, .., 15}; a 9-bit index (8 bits in qs, one in qh).
extern const uint32_t kIq3sGrid[512];

}  // namespace flashkv
