// The figures of the throughput sweep behind `flashkv bench` (docs/PERFORMANCE.md "Bench
// sweeps", issue 7): its options and frontiers, what a row holds, and the KV byte counts.
// The sweep itself runs on the engine (evaluate/bench_sweep_driver.h): one fixed token sequence is
// prefilled incrementally to a series of context frontiers; at each frontier a fixed greedy
// probe of gen_tokens decode steps is timed, and the live session is put back at the
// frontier from an in-memory snapshot so the next interval continues from the exact
// frontier state. Must not: run the model, parse flags, read files or print.
//
// What a row measures (docs/PERFORMANCE.md, "Bench sweeps"):
// - prefill: only the tokens added since the previous frontier, the engine's prefill time
//   (the last chunk also computes the frontier's logits, as a real prefill does);
// - gen: exactly gen_tokens greedy steps (best non-EOS token, each evaluated);
// - kv_bytes: the state's live content at the frontier, Σ over layers and KvSections of
//   the floats that hold information for that token count, × 4 (LiveKvBytes below) —
//   the figure that grows by the model's per-token amount (docs/DS4_MODEL.md §7), not the
//   buffers allocated for the context (see KvAllocBytes);
// - snapshot_bytes: the size of the `.kv` image of that state (header, section table,
//   token ids, logits, layer sections, alignment; no rendered text), i.e. what a disk save
//   would write;
// - snapshot_save_ms: CaptureSnapshot + SealSnapshot (copy out of the backend + CRCs, the
//   CPU side of a disk save without the write); snapshot_load_ms: RestoreSnapshotImage
//   (CRC check + copy into the backend, the CPU side of a load without the read); the
//   engine's rewind point (engine/rewind_point.h). Neither is inside the prefill or gen
//   timers.
#pragma once

#include <cstdint>
#include <vector>

#include "state/kv_state.h"
#include "util/status.h"

namespace flashkv {

struct BenchOptions {
  int ctx_start = 2048;        // first frontier, tokens
  int ctx_max = 32768;         // last frontier; the sequence must hold at least this many tokens
  int step_incr = 2048;        // additive step between frontiers (used when step_mul <= 0)
  double step_mul = 0;         // > 1: next frontier = ceil(frontier · step_mul)
  int gen_tokens = 128;        // greedy decode steps timed at each frontier (0: none)
  int ctx_alloc = 0;           // state capacity; 0: ctx_max + gen_tokens
  int prefill_chunk = 2048;    // most ids per prefill step (the engine's prefill chunk)
  int prefill_chunk_solo = 0;  // … and while nothing decodes (EngineOptions::prefill_chunk_solo)
};

// The frontiers of a sweep: ctx_start, then each step while <= ctx_max, then ctx_max itself
// if the steps passed it by. kInvalidArgument names the bad option (non-positive sizes,
// ctx_start > ctx_max, step_mul in (0, 1], ...).
Expected<std::vector<int>> BenchFrontiers(const BenchOptions& options);

struct BenchRow {
  int64_t ctx = 0;              // frontier, tokens in the state
  int64_t prefill_tokens = 0;   // tokens prefilled for this row (frontier − previous frontier)
  double prefill_s = 0;         // wall time of that prefill
  int gen_tokens = 0;           // decode steps timed
  double gen_s = 0;             // wall time of those steps
  uint64_t kv_bytes = 0;        // LiveKvBytes at the frontier
  uint64_t snapshot_bytes = 0;  // size of the in-memory snapshot image
  double snapshot_save_ms = 0;
  double snapshot_load_ms = 0;
  std::vector<int32_t> probe;  // [gen_tokens] the greedy tokens generated at this frontier

  double prefill_tps() const { return prefill_s > 0 ? double(prefill_tokens) / prefill_s : 0; }
  double gen_tps() const { return gen_s > 0 ? double(gen_tokens) / gen_s : 0; }
};

// Bytes of live KV content in a state of `shape` holding `n_tokens` (see above).
uint64_t LiveKvBytes(const KvShape& shape, int64_t n_tokens);
// Bytes of the buffers `state` holds for its whole context (what the device must have),
// for reference next to LiveKvBytes.
uint64_t KvAllocBytes(const KvState& state);

}  // namespace flashkv
