#include "tools/bench_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "kv/snapshot_codec.h"
#include "kv/snapshot_memory.h"

namespace flashkv {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr KvSection kAllSections[] = {KvSection::kRaw,          KvSection::kCompressed,
                                      KvSection::kCompressorKv, KvSection::kCompressorScore,
                                      KvSection::kIndexerRows,  KvSection::kIndexerKv,
                                      KvSection::kIndexerScore};

Status CheckOptions(const BenchOptions& o) {
  if (o.ctx_start <= 0) return InvalidArgument("--ctx-start must be positive, got {}", o.ctx_start);
  if (o.ctx_max < o.ctx_start) {
    return InvalidArgument("--ctx-max {} is below --ctx-start {}", o.ctx_max, o.ctx_start);
  }
  if (o.step_mul > 0) {
    if (!(o.step_mul > 1.0) || !std::isfinite(o.step_mul)) {
      return InvalidArgument("--step-mul must be a finite number > 1, got {}", o.step_mul);
    }
  } else if (o.step_incr <= 0) {
    return InvalidArgument("--step-incr must be positive, got {}", o.step_incr);
  }
  if (o.gen_tokens < 0) return InvalidArgument("--gen-tokens must be >= 0, got {}", o.gen_tokens);
  if (o.prefill_chunk <= 0) {
    return InvalidArgument("the prefill chunk must be positive, got {}", o.prefill_chunk);
  }
  if (int64_t(o.ctx_max) + o.gen_tokens > std::numeric_limits<int>::max()) {
    return InvalidArgument("--ctx-max {} + --gen-tokens {} overflows", o.ctx_max, o.gen_tokens);
  }
  if (o.ctx_alloc != 0 && o.ctx_alloc < o.ctx_max + o.gen_tokens) {
    return InvalidArgument("--ctx-alloc {} is smaller than --ctx-max {} + --gen-tokens {}",
                           o.ctx_alloc, o.ctx_max, o.gen_tokens);
  }
  return Status::Ok();
}

}  // namespace

Expected<std::vector<int>> BenchFrontiers(const BenchOptions& o) {
  FLASHKV_RETURN_IF_ERROR(CheckOptions(o));
  std::vector<int> out;
  int64_t ctx = o.ctx_start;
  while (ctx <= o.ctx_max) {
    out.push_back(int(ctx));
    int64_t next =
        o.step_mul > 1.0 ? int64_t(std::ceil(double(ctx) * o.step_mul)) : ctx + o.step_incr;
    ctx = std::max(next, ctx + 1);  // a ceil of a tiny step still moves
  }
  if (out.back() != o.ctx_max) out.push_back(o.ctx_max);
  return out;
}

uint64_t LiveKvBytes(const KvShape& shape, int64_t n_tokens) {
  uint64_t floats = 0;
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    for (KvSection s : kAllSections)
      floats += KvState::SectionFloatsFor(shape, int(l), s, n_tokens);
  }
  return floats * sizeof(float);
}

uint64_t KvAllocBytes(const KvState& state) {
  const KvShape& shape = state.shape();
  uint64_t floats = 0;
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    const int L = int(l);
    const uint64_t cap = uint64_t(state.layer(L).comp_cap);
    floats += uint64_t(shape.n_swa) * shape.head_dim;
    floats +=
        cap * shape.head_dim + 2 * KvState::SectionFloatsFor(shape, L, KvSection::kCompressorKv, 0);
    if (shape.layers[l].indexer) {
      floats += cap * shape.indexer_dim +
                2 * KvState::SectionFloatsFor(shape, L, KvSection::kIndexerKv, 0);
    }
  }
  return floats * sizeof(float);
}

int32_t GreedyNonEos(std::span<const float> logits, int32_t eos) {
  int32_t best = -1;
  float best_v = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (int32_t(i) == eos) continue;
    if (best < 0 || logits[i] > best_v) {
      best = int32_t(i);
      best_v = logits[i];
    }
  }
  return best;
}

Expected<std::vector<BenchRow>> RunBenchSweep(Model& model, std::span<const int32_t> tokens,
                                              const BenchOptions& options, int32_t eos,
                                              const SnapshotIdentity& identity,
                                              const BenchCallbacks& callbacks) {
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int> frontiers, BenchFrontiers(options));
  if (int64_t(tokens.size()) < options.ctx_max) {
    return InvalidArgument("the prompt has {} tokens, --ctx-max {} needs at least that many",
                           tokens.size(), options.ctx_max);
  }
  const int n_vocab = model.config().n_vocab;
  if (options.gen_tokens > 0 && n_vocab < 2 && eos >= 0) {
    return InvalidArgument("a vocabulary of {} leaves no non-EOS token to generate", n_vocab);
  }
  const int ctx_alloc =
      options.ctx_alloc > 0 ? options.ctx_alloc : options.ctx_max + options.gen_tokens;
  FLASHKV_ASSIGN_OR_RETURN(KvState state, model.NewState(ctx_alloc));

  std::vector<float> logits(n_vocab);
  std::vector<BenchRow> rows;
  int64_t pos = 0;
  for (int frontier : frontiers) {
    BenchRow row;
    row.ctx = frontier;
    row.prefill_tokens = frontier - pos;

    // Incremental prefill: only [pos, frontier), with the frontier's logits at the end.
    const auto t0 = Clock::now();
    while (pos < frontier) {
      const int64_t n = std::min<int64_t>(options.prefill_chunk, frontier - pos);
      const bool last = pos + n == frontier;
      FLASHKV_RETURN_IF_ERROR(model.Forward(tokens.subspan(size_t(pos), size_t(n)), state,
                                            last ? LogitsFor::kLast : LogitsFor::kNone,
                                            logits.data()));
      pos += n;
      if (callbacks.on_progress) callbacks.on_progress(pos, frontier, "prefill");
    }
    row.prefill_s = Seconds(Clock::now() - t0);
    row.kv_bytes = LiveKvBytes(state.shape(), state.n_tokens());

    // Park the frontier state in memory.
    SnapshotContent content;
    content.tokens = tokens.first(size_t(frontier));
    content.logits = logits;
    content.reason = SaveReason::kManual;
    const auto t_save = Clock::now();
    auto image = CaptureSnapshot(state, identity, content, NowMs());
    if (!image.ok()) return image.status().WithContext(fmt::format("snapshot at {}", frontier));
    SealSnapshot(*image);
    row.snapshot_save_ms = Seconds(Clock::now() - t_save) * 1e3;
    row.snapshot_bytes = image->size();

    // The probe: exactly gen_tokens greedy steps.
    if (callbacks.on_progress) callbacks.on_progress(pos, frontier, "generate");
    row.gen_tokens = options.gen_tokens;
    row.probe.reserve(size_t(options.gen_tokens));
    const auto t_gen = Clock::now();
    for (int i = 0; i < options.gen_tokens; ++i) {
      const int32_t next = GreedyNonEos(logits, eos);
      row.probe.push_back(next);
      FLASHKV_RETURN_IF_ERROR(model.Forward({&next, 1}, state, LogitsFor::kLast, logits.data()));
      if (callbacks.on_probe_step) callbacks.on_probe_step(frontier, i, logits);
    }
    row.gen_s = Seconds(Clock::now() - t_gen);

    // Back to the frontier, so the next interval extends the prompt, not the probe.
    const auto t_load = Clock::now();
    auto restored = RestoreSnapshotImage(*image, identity, state);
    if (!restored.ok()) {
      return restored.status().WithContext(fmt::format("restoring the snapshot at {}", frontier));
    }
    row.snapshot_load_ms = Seconds(Clock::now() - t_load) * 1e3;
    if (state.n_tokens() != frontier) {
      return Internal("restored state holds {} tokens, the frontier is {}", state.n_tokens(),
                      frontier);
    }
    logits = std::move(restored->logits);

    if (callbacks.on_row) callbacks.on_row(row);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace flashkv
