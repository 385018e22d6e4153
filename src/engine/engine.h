// Engine: what the inference worker does with one request — the resume cascade (live
// session → RAM snapshot → disk snapshot → cold prefill, docs/SERVER.md §1), the chunked
// prefill of only the missing suffix, the decode loop (sampler, UTF-8-safe streaming, stop
// sequences, the
// incremental chat parser, tool-call ids), and keeping the session keyed by what the
// client will resend next (pending ids, visible keys, the exact-DSML replay map). Must
// not: parse HTTP or build API shapes (server/ does), or be called from two threads.
//
// Threading: Run and OnShutdown are called by the Scheduler's worker thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "engine/engine_metrics.h"
#include "engine/generation.h"
#include "engine/request_handle.h"
#include "engine/scheduler.h"
#include "engine/session_pool.h"
#include "engine/snapshot_planner.h"
#include "engine/tool_replay_map.h"
#include "kv/cache_policy.h"
#include "kv/disk_cache.h"
#include "kv/ram_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace flashkv {

struct EngineOptions {
  int ctx_size = 32768;       // tokens one session can hold (every KvState is this big)
  int live_sessions = 4;      // sessions kept in memory, LRU beyond that
  int prefill_chunk = 2048;   // ids per forward call while prefilling; cancellation and
                              // progress are checked between chunks, so this bounds how
                              // long a vanished client keeps the worker busy
  RamCache* ram = nullptr;    // tier 2 (snapshots in host RAM); null: none
  DiskCache* disk = nullptr;  // tier 3 (snapshots on disk); null: none
  CachePolicy policy;         // when to write snapshots (with a disk cache)
};

class Engine : public RequestRunner {
 public:
  // Everything passed in must outlive the engine.
  Engine(Model& model, const Tokenizer& tokenizer, ToolReplayMap& replay, EngineMetrics& metrics,
         const EngineOptions& options);

  void Run(RequestHandle& request) override;
  // Saves every live session worth keeping (reason shutdown) and waits for the writes.
  void OnShutdown() override;

  const EngineOptions& options() const { return options_; }
  const SessionPool& sessions() const { return pool_; }

 private:
  // Where a request continues from, decided by the cascade.
  struct Resume {
    int slot = -1;
    CacheInfo cache;
    bool live_hit = false;
    bool ram_looked_up = false;
    bool disk_looked_up = false;
  };
  // The cascade. Puts the rest of the prompt into the chosen session's pending ids.
  Expected<Resume> ResumeFor(const GenerationRequest& request);
  // Tiers 2 and 3: restores the longest usable snapshot of `tier` (kRam or kDisk) into
  // the fresh session at `slot`. False when the tier has none (the session is then
  // empty); true with `*error` set when a restored snapshot cannot serve the request.
  bool TryTier(CacheSource tier, const GenerationRequest& request, int slot, Resume* r,
               Status* error);
  // The snapshot's content for the tiers: the session's evaluated ids and logits, its
  // text or (`visible`) its preferred visible key with that key's tail, and the tool
  // replay map. Views into `session`, `*text_storage` and `*replay_storage`.
  SnapshotContent ContentOf(const Session& session, SaveReason reason, bool visible,
                            std::string* text_storage, std::string* replay_storage) const;
  void PublishRamStats();
  // Evaluates the session's pending ids in chunks of options_.prefill_chunk, reporting
  // progress, pausing at `save_points` (absolute token counts) to write snapshots
  // (`anchors` names those saved as cold anchors); Cancelled when the request is
  // cancelled between chunks.
  Status Prefill(Session& session, RequestHandle& request, const std::vector<int64_t>& save_points,
                 const std::vector<int64_t>& anchors, RequestTiming* timing);
  // Queues a disk snapshot of the session's evaluated tokens. `visible`: file it under its
  // preferred visible key when it has one (evict, shutdown). Never fails the request.
  void SaveSession(Session& session, SaveReason reason, bool visible);
  // Merges the replay section of a restored snapshot, or of every disk entry at start.
  void ImportReplay(std::string_view section);
  void LoadReplayFromDisk();
  // Evaluates the first n pending ids in one forward call.
  Status Evaluate(Session& session, size_t n, bool want_logits);
  // Samples until a finish condition; fills result (but not cache/timing).
  void Generate(Session& session, RequestHandle& request, GenerationResult* result);
  // What the client will resend as the start of its next prompt, when that differs from
  // the session's own text: chat/visible_text.h's texts, each with the pending tail.
  std::vector<VisibleKey> VisibleKeysAfter(const Session& session, const GenerationRequest& request,
                                           const GenerationResult& result) const;

  Model& model_;
  const Tokenizer& tokenizer_;
  ToolReplayMap& replay_;
  EngineMetrics& metrics_;
  const EngineOptions options_;
  const int n_vocab_;
  SessionPool pool_;
  RamCache* ram_;
  DiskCache* disk_;
  ChatMarkerIds markers_;  // for the cold-save chat anchor
  SharedPrefixAnchors shared_anchors_;
  int64_t next_session_id_ = 1;
};

}  // namespace flashkv
