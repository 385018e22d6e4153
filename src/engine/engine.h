// Engine: what the inference worker does with one request — the resume cascade (tier 1
// live session → the snapshot tiers of kv/cache_tier.h in one loop: 2 RAM, 3 disk, 4 the
// shared store → 5 cold prefill, docs/SERVER.md §1), the chunked
// prefill of only the missing suffix, the decode loop (sampler, UTF-8-safe streaming, stop
// sequences, the
// incremental chat parser, tool-call ids), and keeping the session keyed by what the
// client will resend next (pending ids, visible keys, the exact-DSML replay map). Must
// not: parse HTTP or build API shapes (server/ does), or be called from two threads.
//
// Requests run together: each Step() is one Model::ForwardBatch over a decode row of every
// decoding request and prompt chunks of those still reading (round-robin, within
// prefill_chunk tokens a step), so concurrent clients share steps and a long prompt does not
// stall the others' streams. A request holds its live session until it ends (SessionPool
// skips sessions in use); requests beyond max_batch or the live pool wait in the Scheduler.
// Because ForwardBatch keeps each session's bits as if it ran alone, a request's tokens do
// not depend on the others.
//
// A prompt that misses the local tiers asks the shared store (tier 4) on the remote tier's
// lookup thread (kv_remote/remote_fetcher.h, engine_remote.cpp): the request waits holding its
// empty slot, its time to first token includes the lookup, and the others keep stepping.
//
// Threading: Admit, Step, Run and OnShutdown are called by the Scheduler's worker thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "constrain/token_constraint.h"
#include "engine/active_request.h"
#include "engine/engine_metrics.h"
#include "engine/generation.h"
#include "engine/request_handle.h"
#include "engine/scheduler.h"
#include "engine/session_pool.h"
#include "engine/snapshot_planner.h"
#include "engine/step_planner.h"
#include "engine/tool_replay_map.h"
#include "kv/cache_policy.h"
#include "kv/cache_tier.h"
#include "kv_disk/disk_cache.h"
#include "kv_ram/ram_cache.h"
#include "kv_remote/remote_fetcher.h"
#include "kv_remote/remote_restore.h"
#include "kv_remote/remote_tier.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace flashkv {

struct EngineOptions {
  int ctx_size = 32768;      // tokens one session can hold (every KvState is this big)
  int live_sessions = 4;     // sessions kept in memory, LRU beyond that
  int prefill_chunk = 2048;  // ids per forward call while prefilling; cancellation and
                             // progress are checked between chunks, so this bounds how
                             // long a vanished client keeps the worker busy
  // ids per step while no session decodes (0 or at most prefill_chunk: prefill_chunk): no
  // one's next token waits behind the longer step then, and a GPU reads each weight once per
  // chunk (StepPlannerOptions::solo_budget).
  int prefill_chunk_solo = 0;
  RamCache* ram = nullptr;    // tier 2 (snapshots in host RAM); null: none
  DiskCache* disk = nullptr;  // tier 3 (snapshots on disk); null: none
  // Tier 4, the shared store another server's disk saves are mirrored to (needs `disk`:
  // an entry fetched from it is kept there and restored from there); null: none.
  RemoteTier* remote = nullptr;
  // The tiers the resume step asks, in order (kv/cache_tier.h); empty: ResumeOrder of
  // `ram`, `disk` and the shared store over `remote`. Tests put fake tiers here; a
  // blocking() tier must be that shared store (its fetch runs on kv_remote/remote_fetcher.h).
  std::vector<CacheTier*> tiers;
  CachePolicy policy;  // when to write snapshots (with a disk cache)
  int max_batch = 16;  // requests in the batched steps at once (also <= live_sessions);
                       // 1: one request at a time
};

class Engine : public RequestRunner {
 public:
  // Everything passed in must outlive the engine.
  Engine(Model& model, const Tokenizer& tokenizer, ToolReplayMap& replay, EngineMetrics& metrics,
         const EngineOptions& options);
  // Takes the remote lookup thread back out of the metrics before it goes.
  ~Engine() override;

  // The batched path (scheduler.h): a request is admitted only while CanAdmit(); every
  // admitted request ends with kDone or kError pushed by Admit or a later Step().
  bool CanAdmit() const override;
  void Admit(RequestHandle& request) override;
  void Step() override;
  bool idle() const override { return active_.empty() && fetching_.empty(); }
  // Runs `request` to its end on the calling thread (stepping any others admitted too).
  void Run(RequestHandle& request);
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
    bool remote_looked_up = false;
    bool remote_pending = false;  // the slot is held, empty, while the shared store is asked
  };
  // A request whose prompt missed the local tiers, waiting for the remote tier's lookup
  // thread (kv_remote/remote_fetcher.h) while the other requests keep stepping.
  struct Fetching {
    std::unique_ptr<ActiveRequest> a;
    Resume resume;
    uint64_t ticket = 0;
    std::chrono::steady_clock::time_point t0;
  };
  // What one tier's restore means for the request (the error path of Expected: the
  // request fails).
  enum class TierOutcome {
    kMiss,      // the tier had nothing usable, or its entry did not load: ask the next
    kRestored,  // the request continues from the restored session
  };
  // The cascade: tier 1, then one loop over tiers_. Puts the rest of the prompt into the
  // chosen session's pending ids.
  Expected<Resume> ResumeFor(const GenerationRequest& request);
  ResumeLookup LookupFor(const GenerationRequest& request) const;
  // Tiers 2-4: takes `hit`, `source`'s restore into the fresh session at `slot`. A miss or
  // a failed load clears the session; a hit that cannot serve the request (an id outside
  // the vocabulary, no context room) is the request's error.
  Expected<TierOutcome> AdoptHit(CacheSource source, const GenerationRequest& request,
                                 const ResumeLookup& lookup, Expected<TierHit> hit, int slot,
                                 Resume* r);
  // The cascade's end: the whole prompt is prefilled in the fresh session.
  void ColdStart(const GenerationRequest& request, Resume* r);
  // After the cascade: the started event, the snapshot points, prefill or decode.
  void Begin(std::unique_ptr<ActiveRequest> owned, const Resume& resume);
  // engine_remote.cpp. Parks a request for the lookup thread / takes finished lookups
  // (restoring hits, prefilling misses) and ends cancelled ones; `wait`: nothing else
  // to step, so block a little for a result instead of spinning.
  void StartRemoteFetch(std::unique_ptr<ActiveRequest> owned, const Resume& resume);
  void PollRemoteFetches(bool wait);
  // The snapshot's content for the tiers: the session's evaluated ids and logits, its
  // text or (`visible`) its preferred visible key with that key's tail, and the tool
  // replay map. Views into `session`, `*text_storage` and `*replay_storage`.
  SnapshotContent ContentOf(const Session& session, SaveReason reason, bool visible,
                            std::string* text_storage, std::string* replay_storage) const;
  void PublishRamStats();
  // Page-locks the logits buffer of the session in `slot` once (a failure only leaves its
  // copies staged); ~Engine unlocks them before the pool frees them.
  void PinLogits(int slot);
  // Queues a disk snapshot of the session's evaluated tokens. `visible`: file it under its
  // preferred visible key when it has one (evict, shutdown). Never fails the request.
  void SaveSession(Session& session, SaveReason reason, bool visible);
  // Merges the replay section of a restored snapshot, or of every disk entry at start.
  void ImportReplay(std::string_view section);
  void LoadReplayFromDisk();
  // The snapshot points of the request's prefill (absolute token counts, anchors among them).
  void PlanSaves(ActiveRequest& a, const Resume& resume);
  // engine_steps.cpp. The prompt is read: records it and samples the first token.
  void StartDecode(ActiveRequest& a);
  // Picks the next token from the session's logits and streams it; false when the request
  // is finished (a.finish says why), else the token waits, pending, for the next step.
  // `picked`: the id PickDecodingRows drew for it this step (-1: draw here).
  bool SampleNext(ActiveRequest& a, int32_t picked = -1);
  // Draws the next id of every unconstrained decoding row of the step into Row::picked, side
  // by side on pick_pool_ (the rows' logits final: after CopyLastKeptRow).
  void PickDecodingRows();
  // Ends a decoding request: the last events, visible keys, the reply's save, metrics.
  void Finish(ActiveRequest& a);
  // Ends a request whose prompt was not read to its end (cancelled or failed).
  void EndPrefill(ActiveRequest& a, const Status& status);
  // Gives the request's session back and forgets the request (`a` is gone afterwards).
  void Release(ActiveRequest& a);
  ActiveRequest* FindActive(int64_t id);
  // The vocabulary's bytes as a trie for constrained decoding, built at the first
  // constrained request (the worker's alone, like every step).
  std::shared_ptr<const TokenTrie> ConstraintTrie(bool with_specials);
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
  std::shared_ptr<const TokenTrie> constraint_trie_[2];  // without, with special tokens
  SessionPool pool_;
  // Sessions whose logits buffer is page-locked (PinLogits), by slot: a batched step's
  // logits then go straight from the device into them (Backend::ReadMany) instead of through
  // the backend's staging buffers and a host copy — 33 MB a 64-row step.
  std::vector<bool> logits_pinned_;
  RamCache* ram_;
  DiskCache* disk_;
  RemoteTier* remote_;
  std::unique_ptr<RemoteCacheTier> shared_;  // tier 4 over remote_ and disk_, with remote_
  std::vector<CacheTier*> tiers_;            // the resume order (EngineOptions::tiers)
  std::unique_ptr<RemoteFetcher> fetcher_;   // with remote_
  std::vector<Fetching> fetching_;           // admission order
  ChatMarkerIds markers_;                    // for the cold-save chat anchor
  SharedPrefixAnchors shared_anchors_;
  int64_t next_session_id_ = 1;
  StepPlanner planner_;
  std::vector<std::unique_ptr<ActiveRequest>> active_;  // admission order
  int64_t next_request_id_ = 1;
  struct Row {  // one request's part of a step
    ActiveRequest* a = nullptr;
    size_t n = 0;  // pending ids it evaluates
    bool want_logits = false;
    bool at_point = false;  // ends at a.save_points[a.next_point]
    int32_t picked = -1;    // PickDecodingRows' draw
  };
  std::vector<Row> rows_;
  std::vector<SessionChunk> chunks_;
  std::vector<size_t> picking_;            // PickDecodingRows: indexes into rows_
  std::unique_ptr<ThreadPool> pick_pool_;  // made at the first step with two rows to pick
  static constexpr unsigned kMaxPickThreads = 8;
};

}  // namespace flashkv
