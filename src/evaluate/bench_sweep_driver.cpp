#include "evaluate/bench_sweep_driver.h"

#include <fmt/format.h>

#include "engine/engine.h"
#include "evaluate/run_stepped.h"

namespace flashkv {
namespace {

// One frontier's request: the sequence up to it, continued from the live session, with a
// probe of exactly gen_tokens evaluated decode steps that never end at EOS, and a rewind.
GenerationRequest FrontierRequest(std::span<const int32_t> tokens, int frontier,
                                  const BenchOptions& o, std::vector<float>* probe_logits) {
  GenerationRequest r;
  r.prompt_tokens.assign(tokens.begin(), tokens.begin() + frontier);
  r.output = OutputMode::kRaw;
  r.max_tokens = o.gen_tokens;
  r.eval.exact_length = true;
  r.eval.never_eos = true;
  r.eval.evaluate_last = true;
  r.eval.rewind = true;
  r.eval.decode_logits = probe_logits;
  return r;
}

}  // namespace

Expected<std::vector<BenchRow>> RunBenchSweep(Model& model, const Tokenizer& tokenizer,
                                              std::span<const int32_t> tokens,
                                              const BenchOptions& options,
                                              const BenchCallbacks& callbacks) {
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int> frontiers, BenchFrontiers(options));
  if (int64_t(tokens.size()) < options.ctx_max) {
    return InvalidArgument("the prompt has {} tokens, --ctx-max {} needs at least that many",
                           tokens.size(), options.ctx_max);
  }
  const int n_vocab = model.config().n_vocab;
  if (options.gen_tokens > 0 && n_vocab < 2 && tokenizer.eos_id() >= 0) {
    return InvalidArgument("a vocabulary of {} leaves no non-EOS token to generate", n_vocab);
  }
  const int ctx_alloc =
      options.ctx_alloc > 0 ? options.ctx_alloc : options.ctx_max + options.gen_tokens;
  EngineOptions eo;
  eo.ctx_size = ctx_alloc;
  eo.live_sessions = 1;
  eo.prefill_chunk = options.prefill_chunk;
  eo.prefill_chunk_solo = options.prefill_chunk_solo;
  eo.max_batch = 1;
  EngineMetrics metrics;
  ToolReplayMap replay;
  Engine engine(model, tokenizer, replay, metrics, eo);
  const KvShape shape = model.StateShape(ctx_alloc);

  std::vector<BenchRow> rows;
  int64_t pos = 0;  // the frontier the live session is at
  std::vector<float> probe_logits;
  for (int frontier : frontiers) {
    auto at = [frontier](const Status& s) {
      return s.WithContext(fmt::format("bench frontier {}", frontier));
    };
    probe_logits.clear();
    RequestHandle handle(FrontierRequest(tokens, frontier, options,
                                         callbacks.on_probe_logits ? &probe_logits : nullptr));
    int64_t cached = 0;
    auto ran = RunStepped(engine, handle, [&](const GenerationEvent& ev) {
      if (ev.kind == GenerationEvent::Kind::kStarted) cached = ev.cache.cached_tokens;
      if (ev.kind == GenerationEvent::Kind::kPrefill && callbacks.on_progress) {
        callbacks.on_progress(cached + ev.done, frontier, "prefill");
        if (ev.done == ev.total) callbacks.on_progress(cached + ev.done, frontier, "generate");
      }
    });
    if (!ran.ok()) return at(ran.status());
    const std::shared_ptr<const GenerationResult> result = std::move(*ran);
    // Anything but the live session at the previous frontier would time a different prefill.
    if (result->cache.cached_tokens != pos) {
      return at(Internal("the request resumed {} tokens, the previous frontier is {}",
                         result->cache.cached_tokens, pos));
    }
    const Session& session = engine.sessions().at(0);
    if (int64_t(session.tokens().size()) != frontier) {
      return at(Internal("the session holds {} tokens after the probe's rewind",
                         session.tokens().size()));
    }

    BenchRow row;
    row.ctx = frontier;
    row.prefill_tokens = result->timing.prefill_tokens;
    row.prefill_s = result->timing.prefill_ms / 1e3;
    row.gen_tokens = int(result->timing.decode_tokens);
    row.gen_s = result->timing.decode_ms / 1e3;
    row.kv_bytes = LiveKvBytes(shape, frontier);
    row.snapshot_bytes = result->rewind.snapshot_bytes;
    row.snapshot_save_ms = result->rewind.save_ms;
    row.snapshot_load_ms = result->rewind.restore_ms;
    row.probe = result->ids;
    pos = frontier;
    if (callbacks.on_probe_logits) callbacks.on_probe_logits(frontier, probe_logits);
    if (callbacks.on_row) callbacks.on_row(row);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace flashkv
