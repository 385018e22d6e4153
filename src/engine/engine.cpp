#include "engine/engine.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "chat/visible_text.h"
#include "engine/decode_step.h"
#include "engine/output_stream.h"
#include "tokenizer/stream_decoder.h"

namespace flashkv {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

GenerationEvent ErrorEvent(Status status) {
  GenerationEvent ev;
  ev.kind = GenerationEvent::Kind::kError;
  ev.error = std::move(status);
  return ev;
}

}  // namespace

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
      markers_{tokenizer.FindToken(kUserMarker), tokenizer.FindToken(kAssistantMarker)} {
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
    Expected<std::string> key = ram_->Put(session.state(), c);
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

bool Engine::TryTier(CacheSource tier, const GenerationRequest& request, int slot, Resume* r,
                     Status* error) {
  Session& s = pool_.at(slot);
  ResumeLookup lookup;
  lookup.tokens = request.prompt_tokens;
  lookup.text = request.prompt_text;
  lookup.min_tokens = options_.policy.min_load_tokens();
  lookup.max_tokens = options_.ctx_size - 1;
  const char* name = CacheSourceName(tier);
  Expected<ResumeHit> hit = NotFound("");
  std::string origin;
  if (tier == CacheSource::kRam) {
    r->ram_looked_up = true;
    hit = ram_->Load(lookup, s.state());
    PublishRamStats();
  } else {
    r->disk_looked_up = true;
    Expected<DiskHit> d = disk_->Load(lookup, s.state());
    if (d.ok()) origin = d->entry.path;
    hit = d.ok() ? Expected<ResumeHit>(std::move(static_cast<ResumeHit&>(*d))) : d.status();
  }
  if (!hit.ok()) {
    if (hit.status().code() != StatusCode::kNotFound) {
      spdlog::warn("kv: {} lookup failed: {}", name, hit.status().ToString());
    }
    // A failed load clears the state; make the session agree.
    (void)s.Reset(s.id());
    return false;
  }
  // The snapshot's ids are authoritative. A token hit continues with the request's own
  // ids; a text hit tokenizes only the text after the snapshot's.
  const std::vector<int32_t> continuation =
      ResumeContinuation(hit->key(), hit->match(), lookup,
                         [this](std::string_view t) { return tokenizer_.EncodeChatPrompt(t); });
  for (int32_t id : continuation) {
    if (id < 0 || size_t(id) >= tokenizer_.vocab_size()) {
      *error = Corrupt("{} snapshot of {} tokens continues with token id {} outside the vocabulary",
                       name, hit->tokens.size(), id);
      (void)s.Reset(s.id());
      return true;
    }
  }
  ImportReplay(hit->replay);
  // Kept in RAM too: the next session of the same agent will look for the same prefix.
  if (tier == CacheSource::kDisk && ram_ != nullptr) {
    SnapshotContent c;
    c.tokens = hit->tokens;
    c.logits = hit->logits;
    c.text = hit->text;
    c.tail = hit->tail;
    c.replay = hit->replay;
    c.reason = SaveReason::kUnknown;
    c.extensions = hit->extensions;
    const auto t0 = Clock::now();
    Expected<std::string> key = ram_->Put(s.state(), c);
    if (key.ok()) {
      spdlog::info("kv ram: disk snapshot of {} tokens kept in {:.1f} ms", hit->tokens.size(),
                   MsSince(t0));
    }
    PublishRamStats();
  }
  Expected<std::string> text = tokenizer_.Decode(hit->tokens);
  const size_t reused = hit->tokens.size();
  s.AdoptRestored(std::move(hit->tokens), text.ok() ? std::move(*text) : std::string(),
                  hit->logits);
  const int64_t effective = int64_t(reused + continuation.size());
  if (effective >= options_.ctx_size) {
    *error = ResourceExhausted("Prompt has {} tokens, but the configured context size is {} tokens",
                               effective, options_.ctx_size);
    return true;
  }
  for (int32_t id : continuation) s.AddPending(id, tokenizer_.TokenBytes(id));
  r->slot = slot;
  r->cache.source = tier;
  r->cache.detail = fmt::format("{}-{}", name, hit->by_text ? "text" : "token");
  r->cache.cached_tokens = int64_t(reused);
  r->cache.prompt_tokens = effective;
  r->cache.restore_ms = hit->load_ms;
  r->cache.restore_bytes = hit->bytes;
  r->cache.origin = std::move(origin);
  return true;
}

Expected<Engine::Resume> Engine::ResumeFor(const GenerationRequest& request) {
  const int64_t ctx = options_.ctx_size;
  auto too_long = [&](int64_t n) {
    return ResourceExhausted("Prompt has {} tokens, but the configured context size is {} tokens",
                             n, ctx);
  };
  Resume r;

  // Tier 1: a live session the prompt continues.
  if (std::optional<LiveMatch> m =
          pool_.FindBest(request.prompt_text, request.prompt_tokens, tokenizer_)) {
    Session& s = pool_.at(m->slot);
    const int64_t effective = int64_t(s.tokens().size() + m->continuation.size());
    if (effective >= ctx) return too_long(effective);
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
  if (n >= ctx) return too_long(n);
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
  // Saving it and clearing the slot (which waits for the copies out of it) sits on this
  // request's time to first token.
  if (evicted >= 0) {
    spdlog::info("live session {} saved and its slot cleared in {:.1f} ms", evicted,
                 MsSince(t_acquire));
  }

  // Tiers 2 and 3: the longest snapshot in RAM, then on disk, that the prompt continues.
  for (CacheSource tier : {CacheSource::kRam, CacheSource::kDisk}) {
    if ((tier == CacheSource::kRam ? static_cast<void*>(ram_) : disk_) == nullptr) continue;
    Status error;
    if (TryTier(tier, request, r.slot, &r, &error)) {
      if (!error.ok()) return error;
      return r;
    }
  }

  // Tier 4: prefill from the first token.
  Session& s = pool_.at(r.slot);
  for (int32_t id : request.prompt_tokens) s.AddPending(id, tokenizer_.TokenBytes(id));
  r.cache.source = CacheSource::kNone;
  r.cache.prompt_tokens = n;
  return r;
}

Status Engine::Evaluate(Session& session, size_t n, bool want_logits) {
  std::span<const int32_t> ids(session.pending().data(), n);
  Status st =
      model_.Forward(ids, session.state(), want_logits ? LogitsFor::kLast : LogitsFor::kNone,
                     want_logits ? session.logits().data() : nullptr);
  if (!st.ok()) {
    // A failed pass may have written part of the chunk: the state is unusable.
    spdlog::error("forward pass failed, dropping live session {}: {}", session.id(), st.ToString());
    (void)session.Reset(session.id());
    return st;
  }
  session.CommitPending(n, want_logits);
  return Status::Ok();
}

Status Engine::Prefill(Session& session, RequestHandle& request,
                       const std::vector<int64_t>& save_points, const std::vector<int64_t>& anchors,
                       RequestTiming* timing) {
  const Clock::time_point t0 = Clock::now();
  const int64_t total = int64_t(session.pending().size());
  int64_t done = 0;
  const size_t chunk = size_t(std::max(1, options_.prefill_chunk));
  size_t next_point = 0;
  auto account = [&] {
    timing->prefill_tokens = done;
    timing->prefill_ms = MsSince(t0);
  };
  while (!session.pending().empty()) {
    if (request.cancelled()) {
      account();
      return Cancelled("client went away during prefill");
    }
    size_t n = std::min(chunk, session.pending().size());
    const int64_t pos = int64_t(session.tokens().size());
    while (next_point < save_points.size() && save_points[next_point] <= pos) ++next_point;
    bool at_point = false;
    if (next_point < save_points.size() && save_points[next_point] <= pos + int64_t(n)) {
      n = size_t(save_points[next_point] - pos);
      at_point = true;
    }
    const bool last = n == session.pending().size();
    Status st = Evaluate(session, n, last || at_point);
    if (!st.ok()) {
      account();
      return st;
    }
    if (at_point) {
      const bool anchor =
          std::find(anchors.begin(), anchors.end(), save_points[next_point]) != anchors.end();
      SaveSession(session, anchor ? SaveReason::kCold : SaveReason::kContinued, /*visible=*/false);
      ++next_point;
    }
    done += int64_t(n);
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::kPrefill;
    ev.done = done;
    ev.total = total;
    request.Push(std::move(ev));
  }
  account();
  return Status::Ok();
}

void Engine::Generate(Session& session, RequestHandle& request, GenerationResult* result) {
  const GenerationRequest& req = request.request();
  const Clock::time_point t0 = Clock::now();
  const int32_t eos = tokenizer_.eos_id();
  const int64_t room = int64_t(options_.ctx_size) - int64_t(session.total_tokens());
  const int64_t max_new = req.max_tokens > 0 ? std::min<int64_t>(req.max_tokens, room) : room;

  Sampler sampler(req.sampling);
  StreamDecoder decoder(tokenizer_);
  OutputStream output(req);
  auto push = [&request](std::vector<GenerationEvent> events) {
    for (GenerationEvent& ev : events) request.Push(std::move(ev));
  };

  FinishReason finish = FinishReason::kLength;
  int64_t sampled = 0;
  while (true) {
    if (request.cancelled()) {
      finish = FinishReason::kCancelled;
      break;
    }
    if (sampled >= max_new) {
      finish = FinishReason::kLength;
      break;
    }
    const int32_t id = PickNextToken(output, sampler, session.logits());
    ++sampled;
    if (sampled == 1) result->timing.first_token_ms = MsSince(t0);
    session.AddPending(id, tokenizer_.TokenBytes(id));
    if (id == eos) {
      finish = FinishReason::kStop;
      break;
    }
    ++result->completion_tokens;
    if (output.reasoning_open()) ++result->reasoning_tokens;
    Expected<std::string> piece = decoder.Push(id);
    if (piece.ok()) push(output.Feed(*piece));
    if (output.stopped()) {
      finish = FinishReason::kStop;
      break;
    }
    if (output.tool_block_closed()) {
      finish = FinishReason::kToolCalls;
      break;
    }
    if (sampled >= max_new) {
      finish = FinishReason::kLength;
      break;  // the last token stays pending: nobody may need its logits
    }
    Status st = Evaluate(session, session.pending().size(), /*want_logits=*/true);
    if (!st.ok()) {
      finish = FinishReason::kError;
      result->error = st.ToString();
      break;
    }
  }
  push(output.Feed(decoder.Flush()));
  push(output.Finish());
  result->timing.decode_tokens = sampled;
  result->timing.decode_ms = MsSince(t0);
  const std::string error = result->error;
  output.Complete(finish, result);
  if (!error.empty()) result->error = error;
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

void Engine::Run(RequestHandle& request) {
  const GenerationRequest& req = request.request();
  auto result = std::make_shared<GenerationResult>();
  result->timing.queue_ms = MsSince(request.submitted());
  if (request.cancelled()) {
    // Gone between leaving the queue and starting: touch no session.
    metrics_.RecordOutcome(EngineMetrics::Outcome::kCancelled);
    request.Push(ErrorEvent(Cancelled("request cancelled before it started")));
    return;
  }

  Expected<Resume> resume = ResumeFor(req);
  if (!resume.ok()) {
    metrics_.RecordOutcome(EngineMetrics::Outcome::kFailed);
    request.Push(ErrorEvent(resume.status()));
    return;
  }
  Session& session = pool_.at(resume->slot);
  result->cache = resume->cache;
  result->timing.restore_ms = resume->cache.restore_ms;
  {
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::kStarted;
    ev.cache = result->cache;
    request.Push(std::move(ev));
  }

  std::vector<int64_t> save_points;
  std::vector<int64_t> anchors;
  if (disk_ != nullptr || ram_ != nullptr) {
    std::optional<int64_t> cold;
    if (resume->cache.source == CacheSource::kNone) {
      cold = options_.policy.ColdBoundary(session.pending(), markers_);
      if (cold) anchors.push_back(*cold);
    }
    save_points = options_.policy.SavePoints(int64_t(session.tokens().size()),
                                             int64_t(session.total_tokens()), cold,
                                             session.last_saved_tokens());
    if (!resume->live_hit) {
      if (std::optional<int64_t> shared = shared_anchors_.NextSession(
              req.prompt_tokens, int64_t(session.tokens().size()), options_.policy)) {
        anchors.push_back(*shared);
        AddSavePoint(*shared, &save_points);
      }
    }
    // Without a disk only the anchors are kept (in RAM).
    if (disk_ == nullptr) {
      std::erase_if(save_points, [&](int64_t p) {
        return std::find(anchors.begin(), anchors.end(), p) == anchors.end();
      });
    }
  }
  Status st = Prefill(session, request, save_points, anchors, &result->timing);
  metrics_.RecordPrompt(resume->cache.source, resume->cache.cached_tokens,
                        result->timing.prefill_tokens, resume->live_hit, resume->ram_looked_up,
                        resume->disk_looked_up, resume->cache.restore_bytes);
  metrics_.SetLiveSessions(pool_.live_count());
  if (!st.ok()) {
    metrics_.RecordTiming(result->timing);
    if (st.code() == StatusCode::kCancelled) {
      spdlog::info("request cancelled during prefill: cache={} prompt={} evaluated={} session={}",
                   CacheSourceName(result->cache.source), result->cache.prompt_tokens,
                   int64_t(session.tokens().size()), session.id());
      metrics_.RecordOutcome(EngineMetrics::Outcome::kCancelled);
      result->finish = FinishReason::kCancelled;
      GenerationEvent ev;
      ev.kind = GenerationEvent::Kind::kDone;
      ev.result = result;
      request.Push(std::move(ev));
    } else {
      metrics_.RecordOutcome(EngineMetrics::Outcome::kFailed);
      request.Push(ErrorEvent(st));
    }
    return;
  }

  Generate(session, request, result.get());
  result->timing.first_token_ms += result->timing.restore_ms + result->timing.prefill_ms;
  if (!result->parsed.tool_calls.empty() && !result->parsed.raw_dsml.empty()) {
    replay_.Remember(result->tool_call_ids, result->parsed.raw_dsml);
  }
  session.SetVisibleKeys(VisibleKeysAfter(session, req, *result));
  // The decode loop saves no continued frontier inside the reply (snapshot_planner.h).
  if (disk_ != nullptr && result->finish != FinishReason::kCancelled &&
      result->finish != FinishReason::kError &&
      SaveAfterReply(options_.policy, int64_t(session.tokens().size()),
                     session.last_saved_tokens())) {
    SaveSession(session, SaveReason::kContinued, /*visible=*/true);
  }

  metrics_.RecordTiming(result->timing);
  metrics_.SetLiveSessions(pool_.live_count());
  metrics_.RecordOutcome(result->finish == FinishReason::kCancelled
                             ? EngineMetrics::Outcome::kCancelled
                         : result->finish == FinishReason::kError ? EngineMetrics::Outcome::kFailed
                                                                  : EngineMetrics::Outcome::kOk);
  spdlog::info(
      "request done: cache={} ({}) prompt={} cached={} prefill={} ({:.1f} ms) gen={} ({:.1f} "
      "t/s) finish={} session={}",
      CacheSourceName(result->cache.source), result->cache.detail, result->cache.prompt_tokens,
      result->cache.cached_tokens, result->timing.prefill_tokens, result->timing.prefill_ms,
      result->completion_tokens, result->timing.decode_tps(), FinishReasonName(result->finish),
      session.id());
  GenerationEvent ev;
  ev.kind = GenerationEvent::Kind::kDone;
  ev.result = result;
  request.Push(std::move(ev));
}

}  // namespace flashkv
