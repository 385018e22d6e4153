#include "engine/speculative.h"

#include <algorithm>
#include <unordered_map>

#include "model/model.h"
#include "state/kv_checkpoint.h"

namespace flashkv {
namespace {

// The probability of `id` under a sparse distribution (0 outside its support).
double ProbabilityOf(const std::vector<std::pair<int32_t, double>>& dist, int32_t id) {
  for (const auto& [i, p] : dist) {
    if (i == id) return p;
  }
  return 0.0;
}

// A draw from weights w (not necessarily normalised) in their order.
int32_t DrawFrom(Sampler& sampler, const std::vector<std::pair<int32_t, double>>& w) {
  double total = 0.0;
  for (const auto& e : w) total += e.second;
  double r = sampler.Uniform() * total;
  for (const auto& [id, weight] : w) {
    r -= weight;
    if (r < 0.0) return id;
  }
  return w.back().first;
}

}  // namespace

DraftVerdict VerifyDraft(Sampler& sampler, std::span<const DraftToken> draft,
                         std::span<const float> rows, size_t n_vocab) {
  DraftVerdict v;
  const size_t k = draft.size();
  if (n_vocab == 0 || rows.size() < (k + 1) * n_vocab) return v;
  for (size_t i = 0; i < k; ++i) {
    const std::span<const float> row = rows.subspan(i * n_vocab, n_vocab);
    const DraftToken& d = draft[i];
    if (sampler.greedy()) {
      const int32_t best = Sampler::Greedy(row, sampler.exclude_id());
      if (d.id != best) {
        v.next = best;
        return v;
      }
      ++v.accepted;
      continue;
    }
    const std::vector<std::pair<int32_t, double>> p = sampler.Distribution(row);
    const double px = ProbabilityOf(p, d.id);
    const double qx = ProbabilityOf(d.q, d.id);
    // Keep with probability min(1, px / qx); a token the draft could not have drawn (qx 0)
    // is kept only where the target gives it all the mass.
    if (qx > 0.0 ? sampler.Uniform() * qx < px : px >= 1.0) {
      ++v.accepted;
      continue;
    }
    // The residual max(0, p − q), in p's order (most likely first).
    std::unordered_map<int32_t, double> q;
    q.reserve(d.q.size());
    for (const auto& [id, prob] : d.q) q[id] += prob;
    std::vector<std::pair<int32_t, double>> residual;
    residual.reserve(p.size());
    for (const auto& [id, prob] : p) {
      const auto it = q.find(id);
      const double r = prob - (it == q.end() ? 0.0 : it->second);
      if (r > 0.0) residual.emplace_back(id, r);
    }
    // Only rounding can leave no residual (a rejection needs p(x) < q(x), so p > q
    // elsewhere): then the target itself.
    v.next = DrawFrom(sampler, residual.empty() ? p : residual);
    return v;
  }
  v.next = sampler.Sample(rows.subspan(k * n_vocab, n_vocab));
  return v;
}

Expected<DraftVerdict> SpeculativeStep(Model& model, KvState& state, KvCheckpoint& checkpoint,
                                       Sampler& sampler, int32_t last,
                                       std::span<const DraftToken> draft,
                                       std::vector<float>& rows) {
  const size_t k = draft.size();
  if (int(k) + 1 > checkpoint.max_tokens()) {
    return InvalidArgument("a draft of {} tokens needs a checkpoint of {} tokens, not {}", k, k + 1,
                           checkpoint.max_tokens());
  }
  const size_t n_vocab = size_t(model.config().n_vocab);
  std::vector<int32_t> ids;
  ids.reserve(k + 1);
  ids.push_back(last);
  for (const DraftToken& d : draft) ids.push_back(d.id);
  rows.resize((k + 1) * n_vocab);
  FLASHKV_RETURN_IF_ERROR(checkpoint.Capture(state));
  if (Status s = model.Forward(ids, state, LogitsFor::kAll, rows.data()); !s.ok()) {
    (void)checkpoint.Restore(state);
    return s;
  }
  const DraftVerdict v = VerifyDraft(sampler, draft, rows, n_vocab);
  if (size_t(v.accepted) < k) {
    FLASHKV_RETURN_IF_ERROR(checkpoint.Restore(state));
    FLASHKV_RETURN_IF_ERROR(
        model.Forward(std::span<const int32_t>(ids).first(size_t(v.accepted) + 1), state,
                      LogitsFor::kNone, nullptr));
  }
  return v;
}

}  // namespace flashkv
