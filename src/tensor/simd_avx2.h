// AVX2 building blocks shared by the tensor kernels (dequant_fast.cpp, dot.cpp). Internal to
// tensor/. Must not: be included where FLASHKV_TENSOR_AVX2 is not defined.
//
// The kernels are chosen at compile time: the project builds with -march=native, and the
// sanitizer builds (no -march) run the scalar references instead.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define FLASHKV_TENSOR_AVX2 1
#endif

#ifdef FLASHKV_TENSOR_AVX2

#include <immintrin.h>

#include <array>
#include <cstdint>

#include "tensor/iq2_tables.h"

namespace flashkv::internal {

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t HSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline __m256 LoadF16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m256 LoadBF16x8(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// kIq2Signs expanded to 8 bytes of +1 (0x01) or -1 (0xff), the form _mm256_sign_epi8 takes.
constexpr std::array<uint64_t, 128> MakeIq2SignBytes() {
  std::array<uint64_t, 128> t{};
  for (int i = 0; i < 128; ++i)
    for (int j = 0; j < 8; ++j)
      t[i] |= static_cast<uint64_t>((kIq2Signs[i] >> j) & 1 ? 0xffu : 0x01u) << (8 * j);
  return t;
}
inline constexpr std::array<uint64_t, 128> kIq2SignBytes = MakeIq2SignBytes();

// The 32 grid magnitudes (unsigned bytes) of an IQ2_XXS group's index word a.
inline __m256i Iq2GridBytes(uint32_t a) {
  return _mm256_set_epi64x(static_cast<int64_t>(kIq2xxsGrid[a >> 24]),
                           static_cast<int64_t>(kIq2xxsGrid[(a >> 16) & 0xff]),
                           static_cast<int64_t>(kIq2xxsGrid[(a >> 8) & 0xff]),
                           static_cast<int64_t>(kIq2xxsGrid[a & 0xff]));
}

// The 32 signs of an IQ2_XXS group's sign/scale word b, as +1 (0x01) / -1 (0xff) bytes.
inline __m256i Iq2SignBytes(uint32_t b) {
#ifdef __BMI2__
  // Spread the four 7-bit sign fields over four bytes and add each byte's parity as bit 7
  // (kIq2Signs computed, not looked up), then expand bit j of byte k to value 8k + j.
  uint32_t v = _pdep_u32(b, 0x7f7f7f7fu);
  uint32_t p = v ^ (v >> 4);
  p ^= p >> 2;
  p ^= p >> 1;  // bit 0 of each byte: parity of that byte's 7 bits
  v |= (p & 0x01010101u) << 7;
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(v)), spread);
  const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_or_si256(neg, _mm256_set1_epi8(1));
#else
  return _mm256_set_epi64x(static_cast<int64_t>(kIq2SignBytes[(b >> 21) & 127]),
                           static_cast<int64_t>(kIq2SignBytes[(b >> 14) & 127]),
                           static_cast<int64_t>(kIq2SignBytes[(b >> 7) & 127]),
                           static_cast<int64_t>(kIq2SignBytes[b & 127]));
#endif
}

// The signs of two IQ2_XXS groups at once (words b0, b1): one pdep and one parity pass for
// eight sign fields. Same bytes as Iq2SignBytes(b0), Iq2SignBytes(b1).
inline void Iq2SignBytes2(uint32_t b0, uint32_t b1, __m256i* s0, __m256i* s1) {
#ifdef __BMI2__
  const uint64_t fields = (b0 & 0x0fffffffull) | (static_cast<uint64_t>(b1 & 0x0fffffffu) << 28);
  uint64_t v = _pdep_u64(fields, 0x7f7f7f7f7f7f7f7full);
  uint64_t p = v ^ (v >> 4);
  p ^= p >> 2;
  p ^= p >> 1;
  v |= (p & 0x0101010101010101ull) << 7;
  const __m256i spread0 = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i spread1 = _mm256_add_epi8(spread0, _mm256_set1_epi8(4));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i all = _mm256_set1_epi64x(static_cast<int64_t>(v));
  const __m256i bytes0 = _mm256_and_si256(_mm256_shuffle_epi8(all, spread0), bit);
  const __m256i bytes1 = _mm256_and_si256(_mm256_shuffle_epi8(all, spread1), bit);
  *s0 = _mm256_or_si256(_mm256_cmpeq_epi8(bytes0, bit), one);
  *s1 = _mm256_or_si256(_mm256_cmpeq_epi8(bytes1, bit), one);
#else
  *s0 = Iq2SignBytes(b0);
  *s1 = Iq2SignBytes(b1);
#endif
}

}  // namespace flashkv::internal

#endif  // FLASHKV_TENSOR_AVX2
