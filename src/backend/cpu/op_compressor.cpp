// CompressorUpdate: the streaming compressor frontier (docs/DS4_MODEL.md §4.4) in ds4's state
// layout. Channels are independent, so the op splits channel ranges across threads and walks the
// chunk's tokens in order inside each range; the result is the same for any chunking.
//
// Per token at position p (slot s = p mod m): the kv projection and score + ape[s] go to
// the open-window row. When p closes its window (p+1 ≡ 0 mod m) the pooled value of each
// channel j < d_c is written to rows[p / m]:
//   HCA: softmax over the m open rows of score[., j], weights applied to kv[., j];
//   CSA: softmax over 2m slots — the previous window's first halves (columns j) and the
//        open window's second halves (columns d_c + j);
// and the frontier moves on: with overlap the open rows become the previous rows, and the
// open rows are cleared (kv 0, score −inf) so the state depends only on the token count.
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_parallel.h"
#include "tensor/half.h"

namespace flashkv {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline float ApeValue(const Weight& ape, int64_t channel, int64_t slot) {
  const uint64_t idx = uint64_t(slot) * ape.ne[0] + channel;
  if (ape.type == DType::kF16) {
    return F16ToF32(reinterpret_cast<const uint16_t*>(ape.data.get())[idx]);
  }
  return reinterpret_cast<const float*>(ape.data.get())[idx];
}

}  // namespace

void CpuBackend::CompressorUpdate(const CompressorArgs& a) {
  const int m = a.ratio;
  const int d = a.d_c;
  const int width = (a.overlap ? 2 : 1) * d;
  const float* kv = a.kv.get();
  const float* score = a.score.get();
  float* skv = a.state_kv.get();
  float* ssc = a.state_score.get();
  float* rows = a.rows.get();
  const int open0 = a.overlap ? m : 0;  // first row of the open window

  // Thread task: channels [j0, j1) of the first half (and their second-half partners).
  Parallel(size_t(d), 16, [&](size_t j0, size_t j1, int) {
    for (int i = 0; i < a.n_tokens; ++i) {
      const int64_t pos = a.pos0 + i;
      const int slot = int(pos % m);
      const size_t row = size_t(open0 + slot) * width;
      for (size_t j = j0; j < j1; ++j) {
        skv[row + j] = kv[size_t(i) * width + j];
        ssc[row + j] = score[size_t(i) * width + j] + ApeValue(*a.ape, j, slot);
        if (a.overlap) {
          skv[row + d + j] = kv[size_t(i) * width + d + j];
          ssc[row + d + j] = score[size_t(i) * width + d + j] + ApeValue(*a.ape, d + j, slot);
        }
      }
      if ((pos + 1) % m != 0) continue;

      float* out = rows + size_t(pos / m) * d;
      for (size_t j = j0; j < j1; ++j) {
        float max_score = kNegInf;
        for (int r = 0; r < m; ++r) {
          if (a.overlap) {
            const float sp = ssc[size_t(r) * width + j];
            const float sc = ssc[size_t(m + r) * width + d + j];
            if (sp > max_score) max_score = sp;
            if (sc > max_score) max_score = sc;
          } else {
            const float s = ssc[size_t(r) * width + j];
            if (s > max_score) max_score = s;
          }
        }
        if (max_score <= kNegInf * 0.5f) {
          out[j] = 0.0f;
          continue;
        }
        float denom = 0.0f;
        float sum = 0.0f;
        for (int r = 0; r < m; ++r) {
          if (a.overlap) {
            const float wp = std::exp(ssc[size_t(r) * width + j] - max_score);
            const float wc = std::exp(ssc[size_t(m + r) * width + d + j] - max_score);
            denom += wp + wc;
            sum += wp * skv[size_t(r) * width + j];
            sum += wc * skv[size_t(m + r) * width + d + j];
          } else {
            const float w = std::exp(ssc[size_t(r) * width + j] - max_score);
            denom += w;
            sum += w * skv[size_t(r) * width + j];
          }
        }
        out[j] = denom > 0.0f ? sum / denom : 0.0f;
      }
      // Advance the frontier for this thread's columns (j and d + j).
      for (int r = 0; r < m; ++r) {
        const size_t open = size_t(open0 + r) * width;
        const size_t prev = size_t(r) * width;
        for (size_t j = j0; j < j1; ++j) {
          for (size_t col : {j, j + size_t(d)}) {
            if (col >= size_t(width)) continue;
            if (a.overlap) {
              skv[prev + col] = skv[open + col];
              ssc[prev + col] = ssc[open + col];
            }
            skv[open + col] = 0.0f;
            ssc[open + col] = kNegInf;
          }
        }
      }
    }
  });
}

}  // namespace flashkv
