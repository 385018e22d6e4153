#include "util/logit_distance.h"

#include <algorithm>
#include <cmath>

namespace flashkv {
namespace {

double LogSumExp(const float* l, int n) {
  const double m = *std::max_element(l, l + n);
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(double(l[i]) - m);
  return m + std::log(s);
}

}  // namespace

double SoftmaxKl(const float* p_logits, const float* q_logits, int n) {
  const double lp = LogSumExp(p_logits, n), lq = LogSumExp(q_logits, n);
  double kl = 0;
  for (int i = 0; i < n; ++i) {
    const double a = double(p_logits[i]) - lp;
    kl += std::exp(a) * (a - (double(q_logits[i]) - lq));
  }
  return std::max(kl, 0.0);
}

double Nmse(const float* ref, const float* got, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  return den > 0 ? num / den : num;
}

}  // namespace flashkv
