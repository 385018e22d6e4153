// The IQ2_XXS, IQ2_XS and IQ2_S codebooks: GGML's published tables, which GGUF files quantized as
// IQ2_XXS / IQ2_XS / IQ2_S index.
// Must not: hold kernels. They are data, so they live apart from the code that reads them.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace flashkv {

// 256 points of the E8-lattice-derived codebook; byte j of entry i is the magnitude (8, 25 or
// 43) of value j. The signs are stored separately.
extern const uint64_t kIq2xxsGrid[256];

// IQ2_XS's 512-point codebook (GGML's iq2xs_grid), bytes from {8, 25, 43} as above; a 9-bit
// index in the low bits of each IQ2_XS qs word.
extern const uint64_t kIq2xsGrid[512];

// IQ2_S's 1024-point codebook (GGML's iq2s_grid), bytes from {8, 25, 43}; a 10-bit index (8
// bits in qs, two in qh).
extern const uint64_t kIq2sGrid[1024];

// kIq2Signs[i] = i with bit 7 set when i has an odd number of set bits, so every 8-bit sign
// mask has an even number of negations (7 bits stored, the 8th implied). GGML's ksigns_iq2xs.
constexpr std::array<uint8_t, 128> MakeIq2Signs() {
  std::array<uint8_t, 128> t{};
  for (unsigned i = 0; i < 128; ++i)
    t[i] = static_cast<uint8_t>(i | ((std::popcount(i) & 1u) << 7));
  return t;
}
inline constexpr std::array<uint8_t, 128> kIq2Signs = MakeIq2Signs();

}  // namespace flashkv
