#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "chat/visible_text.h"
#include "engine/worker_clock.h"
#include "kv_remote/remote_restore.h"

namespace flashkv {
using Clock = WorkerClock;

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kError:
      return "error";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "error";
}

Engine::Engine(Model& model, const Tokenizer& tokenizer, ToolReplayMap& replay,
               EngineMetrics& metrics, const EngineOptions& options)
    : model_(model),
      tokenizer_(tokenizer),
      replay_(replay),
      metrics_(metrics),
      options_(options),
      n_vocab_(model.config().n_vocab),
      pool_(options.live_sessions, model.config().n_vocab,
            [this] { return model_.NewState(options_.ctx_size); }),
      ram_(options.ram),
      disk_(options.disk),
      remote_(options.disk != nullptr ? options.remote : nullptr),
      markers_{tokenizer.FindToken(kUserMarker), tokenizer.FindToken(kAssistantMarker)},
      planner_(StepPlannerOptions{.max_active = std::numeric_limits<int>::max(),
                                  .prefill_budget = std::max(1, options.prefill_chunk),
                                  .max_chunk = std::max(1, options.prefill_chunk),
                                  .solo_budget = options.prefill_chunk_solo,
                                  .round_robin = true}) {
  if (remote_ != nullptr) {
    shared_ = std::make_unique<RemoteCacheTier>(*remote_, *disk_);
    fetcher_ = std::make_unique<RemoteFetcher>(*remote_, *disk_);
    metrics_.SetRemoteFetcher(fetcher_.get());
  }
  tiers_ = options.tiers.empty() ? ResumeOrder(ram_, disk_, shared_.get()) : options.tiers;
  if (disk_ != nullptr) LoadReplayFromDisk();
  // The first snapshots' capture buffers, page-locked ahead so that neither the first save
  // nor the first RAM put stalls decoding: sized for the largest state this context holds
  // (text at most 16 bytes a token), at most 2 GiB.
  if (disk_ != nullptr || ram_ != nullptr) {
    const int64_t ctx = options_.ctx_size;
    const uint64_t most = std::min(
        SnapshotFileBytes(model_.StateShape(int(ctx)), ctx, n_vocab_, size_t(ctx) * 16, {}),
        uint64_t(2) << 30);
    if (disk_ != nullptr) disk_->PrepareHostBuffer(model_.backend(), most);
    if (ram_ != nullptr) ram_->PrepareHostBuffer(most);
  }
  PublishRamStats();
}

Engine::~Engine() {
  if (fetcher_ != nullptr) metrics_.SetRemoteFetcher(nullptr);
  for (size_t i = 0; i < logits_pinned_.size(); ++i) {
    if (logits_pinned_[i]) model_.backend().UnpinHost(pool_.at(int(i)).logits().data());
  }
}

void Engine::PinLogits(int slot) {
  if (size_t(slot) >= logits_pinned_.size()) logits_pinned_.resize(size_t(slot) + 1, false);
  if (logits_pinned_[size_t(slot)]) return;
  const std::span<float> logits = pool_.at(slot).logits();
  logits_pinned_[size_t(slot)] = model_.backend().PinHost(logits.data(), logits.size_bytes()).ok();
}

void Engine::PublishRamStats() {
  if (ram_ != nullptr) metrics_.SetRamStats(ram_->stats());
}

void Engine::ImportReplay(std::string_view section) {
  if (section.empty()) return;
  Expected<size_t> n = replay_.DecodeTrailer(section);
  if (!n.ok()) spdlog::warn("tool replay map in snapshot: {}", n.status().ToString());
}

void Engine::LoadReplayFromDisk() {
  // Clients resend tool calls from before a restart; their exact bytes live in the
  // snapshots' replay sections. Reading them up front lets the first request after a
  // restart render the sampled DSML, so its text still matches the snapshot it continues.
  const std::vector<std::string> sections = disk_->ReplaySections();
  for (const std::string& section : sections) ImportReplay(section);
  if (!sections.empty()) {
    spdlog::info("tool replay map: {} ids from {} snapshot(s)", replay_.size(), sections.size());
  }
}

SnapshotContent Engine::ContentOf(const Session& session, SaveReason reason, bool visible,
                                  std::string* text_storage, std::string* replay_storage) const {
  SnapshotContent c;
  c.tokens = session.tokens();
  c.logits = session.logits();
  c.reason = reason;
  std::string& text = *text_storage;
  text = session.evaluated_text();
  if (visible && !session.visible_keys().empty()) {
    // Filed under what the client will resend, so a text lookup after a restart finds it;
    // the ids that text covers beyond the evaluated ones travel with it.
    const VisibleKey& key = session.visible_keys().front();
    text = key.text;
    c.tail = key.tail;
  }
  *replay_storage = replay_.EncodeTrailer(text);
  c.replay = *replay_storage;
  c.text = text;
  return c;
}

void Engine::SaveSession(Session& session, SaveReason reason, bool visible) {
  // The RAM tier takes what another request is likely to continue soon: a session leaving
  // the live pool and a cold chat anchor (the next session of the same agent starts there).
  const bool to_ram =
      ram_ != nullptr && (reason == SaveReason::kEvict || reason == SaveReason::kCold);
  if ((!to_ram && disk_ == nullptr) || !session.logits_valid() || session.tokens().empty()) {
    return;
  }
  const int64_t n = int64_t(session.tokens().size());
  if ((reason == SaveReason::kEvict || reason == SaveReason::kShutdown) &&
      !options_.policy.ShouldSaveSession(n)) {
    return;
  }
  std::string text, replay;
  const SnapshotContent c = ContentOf(session, reason, visible, &text, &replay);
  if (to_ram) {
    const auto t0 = Clock::now();
    Expected<std::string> key = ram_->Offer(session.state(), c);
    if (key.ok()) {
      spdlog::info("kv ram: {} snapshot of session {} ({} tokens) kept in {:.1f} ms",
                   SaveReasonName(reason), session.id(), n, MsSince(t0));
    } else {
      spdlog::info("kv ram: {} snapshot of {} tokens not kept: {}", SaveReasonName(reason), n,
                   key.status().message());
    }
    PublishRamStats();
  }
  if (disk_ == nullptr) return;
  Expected<std::string> key = disk_->Save(session.state(), c);
  if (!key.ok()) {
    spdlog::info("kv: {} snapshot of {} tokens not saved: {}", SaveReasonName(reason), n,
                 key.status().message());
    return;
  }
  session.set_last_saved_tokens(n);
  spdlog::info("kv: saving {} snapshot of session {} ({} tokens) as {}", SaveReasonName(reason),
               session.id(), n, *key);
}

void Engine::OnShutdown() {
  if (disk_ == nullptr) return;
  for (int i = 0; i < pool_.size(); ++i) SaveSession(pool_.at(i), SaveReason::kShutdown, true);
  Status st = disk_->Flush();
  if (!st.ok()) spdlog::warn("kv: shutdown writes: {}", st.ToString());
}

ResumeLookup Engine::LookupFor(const GenerationRequest& request) const {
  ResumeLookup lookup;
  lookup.tokens = request.prompt_tokens;
  lookup.text = request.prompt_text;
  lookup.min_tokens = options_.policy.min_load_tokens();
  lookup.max_tokens = options_.ctx_size - 1;
  return lookup;
}

Expected<Engine::TierOutcome> Engine::AdoptHit(CacheSource source, const GenerationRequest& request,
                                               const ResumeLookup& lookup, Expected<TierHit> hit,
                                               int slot, Resume* r) {
  Session& s = pool_.at(slot);
  const char* name = CacheSourceName(source);
  if (!hit.ok()) {
    if (hit.status().code() != StatusCode::kNotFound) {
      spdlog::warn("kv: {} lookup failed: {}", name, hit.status().ToString());
    }
    // A failed load clears the state; make the session agree.
    (void)s.Reset(s.id());
    return TierOutcome::kMiss;
  }
  // The snapshot's ids are authoritative. A token hit continues with the request's own
  // ids; a text hit tokenizes only the text after the snapshot's.
  const std::vector<int32_t> continuation =
      ResumeContinuation(hit->key(), hit->match(), lookup,
                         [this](std::string_view t) { return tokenizer_.EncodeChatPrompt(t); });
  for (int32_t id : continuation) {
    if (id < 0 || size_t(id) >= tokenizer_.vocab_size()) {
      (void)s.Reset(s.id());
      return Corrupt("{} snapshot of {} tokens continues with token id {} outside the vocabulary",
                     name, hit->tokens.size(), id);
    }
  }
  ImportReplay(hit->replay);
  // Kept in RAM too: the next session of the same agent will look for the same prefix.
  if (source != CacheSource::kRam && ram_ != nullptr) {
    SnapshotContent c;
    c.tokens = hit->tokens;
    c.logits = hit->logits;
    c.text = hit->text;
    c.tail = hit->tail;
    c.replay = hit->replay;
    c.reason = SaveReason::kUnknown;
    c.extensions = hit->extensions;
    const auto t0 = Clock::now();
    Expected<std::string> key = ram_->Offer(s.state(), c);
    if (key.ok()) {
      spdlog::info("kv ram: {} snapshot of {} tokens kept in {:.1f} ms", name, hit->tokens.size(),
                   MsSince(t0));
    }
    PublishRamStats();
  }
  Expected<std::string> text = tokenizer_.Decode(hit->tokens);
  const size_t reused = hit->tokens.size();
  s.AdoptRestored(std::move(hit->tokens), text.ok() ? std::move(*text) : std::string(),
                  hit->logits);
  const int64_t effective = int64_t(reused + continuation.size());
  FLASHKV_RETURN_IF_ERROR(CheckContextRoom(request, effective, options_.ctx_size));
  for (int32_t id : continuation) s.AddPending(id, tokenizer_.TokenBytes(id));
  r->slot = slot;
  r->cache.source = source;
  r->cache.detail = fmt::format("{}-{}", name, hit->by_text ? "text" : "token");
  r->cache.cached_tokens = int64_t(reused);
  r->cache.prompt_tokens = effective;
  r->cache.restore_ms = hit->load_ms;
  r->cache.restore_bytes = hit->bytes;
  r->cache.origin = std::move(hit->origin);
  return TierOutcome::kRestored;
}

Expected<Engine::Resume> Engine::ResumeFor(const GenerationRequest& request) {
  const int64_t ctx = options_.ctx_size;
  FLASHKV_RETURN_IF_ERROR(CheckPromptIds(request, n_vocab_));
  Resume r;

  // Tier 1: a live session the prompt continues.
  if (std::optional<LiveMatch> m =
          pool_.FindBest(request.prompt_text, request.prompt_tokens, tokenizer_)) {
    Session& s = pool_.at(m->slot);
    const int64_t effective = int64_t(s.tokens().size() + m->continuation.size());
    FLASHKV_RETURN_IF_ERROR(CheckContextRoom(request, effective, ctx));
    // Like a restored snapshot, the session continues from its evaluated ids; its pending
    // ids come back through the continuation when the prompt still holds them.
    s.DropPending();
    for (int32_t id : m->continuation) s.AddPending(id, tokenizer_.TokenBytes(id));
    pool_.Touch(m->slot);
    r.slot = m->slot;
    r.live_hit = true;
    r.cache.source = CacheSource::kLive;
    r.cache.detail = LiveMatchKindName(m->kind);
    r.cache.cached_tokens = int64_t(m->reused);
    r.cache.prompt_tokens = effective;
    return r;
  }

  // No live session continues the prompt: a fresh slot. The least recently used session
  // makes room, and goes to disk first.
  const int64_t n = int64_t(request.prompt_tokens.size());
  FLASHKV_RETURN_IF_ERROR(CheckContextRoom(request, n, ctx));
  if (n == 0) return InvalidArgument("empty prompt");
  const bool full = pool_.live_count() >= pool_.capacity();
  const Clock::time_point t_acquire = Clock::now();
  int64_t evicted = -1;
  FLASHKV_ASSIGN_OR_RETURN(r.slot, pool_.AcquireFresh(next_session_id_++, [&](Session& old) {
    evicted = old.id();
    spdlog::info("live session {} evicted ({} tokens)", old.id(), old.total_tokens());
    SaveSession(old, SaveReason::kEvict, /*visible=*/true);
  }));
  if (full) metrics_.RecordLiveEviction();
  PinLogits(r.slot);
  // Saving it and clearing the slot (which waits for the copies out of it) sits on this
  // request's time to first token.
  if (evicted >= 0) {
    spdlog::info("live session {} saved and its slot cleared in {:.1f} ms", evicted,
                 MsSince(t_acquire));
  }

  // Tiers 2-4 (kv/cache_tier.h), cheapest first: the longest snapshot each holds that the
  // prompt continues; a miss or an entry that did not load asks the next.
  const ResumeLookup lookup = LookupFor(request);
  for (CacheTier* tier : tiers_) {
    const CacheSource source = tier->source();
    r.ram_looked_up |= source == CacheSource::kRam;
    r.disk_looked_up |= source == CacheSource::kDisk;
    r.remote_looked_up |= source == CacheSource::kRemote;
    if (tier->blocking()) {
      // Asked on the lookup thread; the request waits for it (Admit parks it).
      r.remote_pending = true;
      return r;
    }
    Expected<TierHit> hit = tier->Restore(lookup, pool_.at(r.slot).state());
    if (source == CacheSource::kRam) PublishRamStats();
    FLASHKV_ASSIGN_OR_RETURN(const TierOutcome outcome,
                             AdoptHit(source, request, lookup, std::move(hit), r.slot, &r));
    if (outcome == TierOutcome::kRestored) return r;
  }

  ColdStart(request, &r);
  return r;
}

void Engine::ColdStart(const GenerationRequest& request, Resume* r) {
  // Tier 5: prefill from the first token.
  Session& s = pool_.at(r->slot);
  for (int32_t id : request.prompt_tokens) s.AddPending(id, tokenizer_.TokenBytes(id));
  r->cache.source = CacheSource::kNone;
  r->cache.prompt_tokens = int64_t(request.prompt_tokens.size());
}

std::vector<VisibleKey> Engine::VisibleKeysAfter(const Session& session,
                                                 const GenerationRequest& request,
                                                 const GenerationResult& result) const {
  std::vector<VisibleKey> keys;
  if (request.output != OutputMode::kChat || request.history.empty()) return keys;
  // After a stop sequence the KV holds text the client never saw; after an error or a
  // cancel the client's next prompt is unknowable.
  if (result.finish == FinishReason::kError || result.finish == FinishReason::kCancelled ||
      !result.stop_sequence.empty()) {
    return keys;
  }
  const bool ended_with_eos =
      !session.pending().empty() && session.pending().back() == tokenizer_.eos_id();

  ChatMessage reply;
  reply.role = ChatRole::kAssistant;
  reply.content = result.parsed.content;
  reply.reasoning = result.parsed.reasoning;
  reply.raw_dsml = result.parsed.raw_dsml;
  for (size_t i = 0; i < result.parsed.tool_calls.size(); ++i) {
    reply.tool_calls.push_back({result.tool_call_ids[i], result.parsed.tool_calls[i].name,
                                result.parsed.tool_calls[i].arguments});
  }
  // The session's own text plus the EOS is found by the byte-prefix path already.
  std::string exact = session.text();
  if (!ended_with_eos) exact += tokenizer_.TokenBytes(tokenizer_.eos_id());
  // The first text is the one this client most likely resends (disk saves use it).
  for (std::string& text : VisibleTextsAfterReply(request.history, reply, request.prompt_options,
                                                  request.replays_reasoning)) {
    if (text == exact) continue;
    VisibleKey key;
    key.text = std::move(text);
    key.tail = session.pending();
    if (!ended_with_eos) key.tail.push_back(tokenizer_.eos_id());
    keys.push_back(std::move(key));
  }
  return keys;
}

bool Engine::CanAdmit() const {
  return int(active_.size() + fetching_.size()) <
         std::min(std::max(options_.max_batch, 1), pool_.capacity());
}

void Engine::PlanSaves(ActiveRequest& a, const Resume& resume) {
  if (disk_ == nullptr && ram_ == nullptr) return;
  const GenerationRequest& req = a.request.request();
  const Session& session = pool_.at(a.slot);
  std::optional<int64_t> cold;
  if (resume.cache.source == CacheSource::kNone) {
    cold = options_.policy.ColdBoundary(session.pending(), markers_);
    if (cold) a.anchors.push_back(*cold);
  }
  a.save_points =
      options_.policy.SavePoints(int64_t(session.tokens().size()), int64_t(session.total_tokens()),
                                 cold, session.last_saved_tokens());
  if (!resume.live_hit) {
    if (std::optional<int64_t> shared = shared_anchors_.NextSession(
            req.prompt_tokens, int64_t(session.tokens().size()), options_.policy)) {
      a.anchors.push_back(*shared);
      AddSavePoint(*shared, &a.save_points);
    }
  }
  // Without a disk only the anchors are kept (in RAM).
  if (disk_ == nullptr) {
    std::erase_if(a.save_points, [&](int64_t p) {
      return std::find(a.anchors.begin(), a.anchors.end(), p) == a.anchors.end();
    });
  }
}

void Engine::Admit(RequestHandle& request) {
  auto owned = std::make_unique<ActiveRequest>(next_request_id_++, request);
  ActiveRequest& a = *owned;
  a.result->timing.queue_ms = MsSince(request.submitted());
  if (request.cancelled()) {
    // Gone between leaving the queue and starting: touch no session.
    metrics_.RecordOutcome(EngineMetrics::Outcome::kCancelled);
    request.Push(ErrorEvent(Cancelled("request cancelled before it started")));
    return;
  }
  Expected<Resume> resume = ResumeFor(request.request());
  if (!resume.ok()) {
    metrics_.RecordOutcome(EngineMetrics::Outcome::kFailed);
    request.Push(ErrorEvent(resume.status()));
    return;
  }
  pool_.at(resume->slot).set_in_use(true);
  if (resume->remote_pending) {
    StartRemoteFetch(std::move(owned), *resume);
    return;
  }
  Begin(std::move(owned), *resume);
}

void Engine::Begin(std::unique_ptr<ActiveRequest> owned, const Resume& resume) {
  ActiveRequest& a = *owned;
  RequestHandle& request = a.request;
  Session& session = pool_.at(resume.slot);
  a.slot = resume.slot;
  a.live_hit = resume.live_hit;
  a.ram_looked_up = resume.ram_looked_up;
  a.disk_looked_up = resume.disk_looked_up;
  a.remote_looked_up = resume.remote_looked_up;
  a.result->cache = resume.cache;
  a.result->timing.restore_ms = resume.cache.restore_ms;
  {
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::kStarted;
    ev.cache = a.result->cache;
    request.Push(std::move(ev));
  }
  PlanSaves(a, resume);
  a.prefill_t0 = Clock::now();
  a.prefill_total = int64_t(session.pending().size());
  active_.push_back(std::move(owned));
  if (a.prefill_total == 0) {
    StartDecode(a);
    return;
  }
  // Cannot fail: the id is new and the count positive.
  (void)planner_.Add(a.id, a.prefill_total);
}

void Engine::Run(RequestHandle& request) {
  Admit(request);
  while (!idle()) Step();
}

}  // namespace flashkv
