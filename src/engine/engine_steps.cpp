// The engine's batched steps: prompt chunks and decode rows of every admitted request in
// one Model::ForwardBatch, then each request's snapshot points, progress events, sampling
// and streaming, and the end of the requests that finished (engine.h).
#include <algorithm>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/decode_step.h"
#include "engine/engine.h"
#include "engine/prefill_progress.h"
#include "engine/worker_clock.h"

namespace flashkv {
namespace {

// The logprobs of the tokens sampled since the last text event ride on the first of
// `events` that carries text, so a stream sends them with (or just before) their text.
void AttachLogprobs(ActiveRequest& a, std::vector<GenerationEvent>* events) {
  if (a.unsent_logprobs.empty()) return;
  for (GenerationEvent& ev : *events) {
    if (ev.kind != GenerationEvent::Kind::kChat && ev.kind != GenerationEvent::Kind::kText) {
      continue;
    }
    ev.logprobs = std::move(a.unsent_logprobs);
    a.unsent_logprobs.clear();
    return;
  }
}

void LogPrefillProgress(ActiveRequest& a, int slot) {
  const WorkerClock::time_point now = WorkerClock::now();
  if (!PrefillLogDue(now, a.prefill_t0, a.prefill_logged, a.prefill_done, a.prefill_total)) {
    return;
  }
  a.prefill_logged = now;
  spdlog::info(
      "{}", PrefillProgressLine(a.prefill_done, a.prefill_total,
                                std::chrono::duration<double>(now - a.prefill_t0).count(), slot));
}

}  // namespace

std::shared_ptr<const TokenTrie> Engine::ConstraintTrie(bool with_specials) {
  std::shared_ptr<const TokenTrie>& trie = constraint_trie_[with_specials ? 1 : 0];
  if (trie) return trie;
  const size_t n = tokenizer_.vocab_size();
  std::vector<std::string> bytes(n);
  std::vector<bool> usable(n);
  for (size_t id = 0; id < n; ++id) {
    bytes[id] = std::string(tokenizer_.TokenBytes(int32_t(id)));
    usable[id] = with_specials || !tokenizer_.IsSpecial(int32_t(id));
  }
  trie = std::make_shared<const TokenTrie>(bytes, usable);
  return trie;
}

ActiveRequest* Engine::FindActive(int64_t id) {
  for (const std::unique_ptr<ActiveRequest>& a : active_) {
    if (a->id == id) return a.get();
  }
  return nullptr;
}

void Engine::Release(ActiveRequest& a) {
  if (a.slot >= 0) pool_.at(a.slot).set_in_use(false);
  planner_.Remove(a.id);
  std::erase_if(active_, [&](const std::unique_ptr<ActiveRequest>& p) { return p.get() == &a; });
}

void Engine::EndPrefill(ActiveRequest& a, const Status& status) {
  GenerationResult& result = *a.result;
  const Session& session = pool_.at(a.slot);
  result.timing.prefill_tokens = a.prefill_done;
  result.timing.prefill_ms = MsSince(a.prefill_t0);
  metrics_.RecordPrompt(result.cache.source, result.cache.cached_tokens,
                        result.timing.prefill_tokens, a.live_hit, a.ram_looked_up, a.disk_looked_up,
                        a.remote_looked_up, result.cache.restore_bytes);
  metrics_.SetLiveSessions(pool_.live_count());
  metrics_.RecordTiming(result.timing);
  if (status.code() == StatusCode::kCancelled) {
    spdlog::info("request cancelled during prefill: cache={} prompt={} evaluated={} session={}",
                 CacheSourceName(result.cache.source), result.cache.prompt_tokens,
                 int64_t(session.tokens().size()), session.id());
    metrics_.RecordOutcome(EngineMetrics::Outcome::kCancelled);
    result.finish = FinishReason::kCancelled;
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::kDone;
    ev.result = a.result;
    a.request.Push(std::move(ev));
  } else {
    metrics_.RecordOutcome(EngineMetrics::Outcome::kFailed);
    a.request.Push(ErrorEvent(status));
  }
  Release(a);
}

void Engine::StartDecode(ActiveRequest& a) {
  GenerationResult& result = *a.result;
  Session& session = pool_.at(a.slot);
  const GenerationRequest& req = a.request.request();
  result.timing.prefill_tokens = a.prefill_done;
  result.timing.prefill_ms = MsSince(a.prefill_t0);
  metrics_.RecordPrompt(result.cache.source, result.cache.cached_tokens,
                        result.timing.prefill_tokens, a.live_hit, a.ram_looked_up, a.disk_looked_up,
                        a.remote_looked_up, result.cache.restore_bytes);
  metrics_.SetLiveSessions(pool_.live_count());

  a.decoding = true;
  a.sampler =
      std::make_unique<Sampler>(req.sampling, req.eval.never_eos ? tokenizer_.eos_id() : -1);
  a.decoder = std::make_unique<StreamDecoder>(tokenizer_);
  a.output = std::make_unique<OutputStream>(req);
  if (req.constraint) {
    a.constraint = std::make_unique<TokenConstraint>(
        req.constraint, ConstraintTrie(req.constraint_prefix), tokenizer_.eos_id());
  }
  if (req.eval.rewind) {
    // Taken before the decode clock starts: the probe's time is the decode alone.
    Expected<RewindPoint> point = RewindPoint::Capture(session, &result.rewind);
    if (!point.ok()) {
      a.decode_t0 = WorkerClock::now();
      a.finish = FinishReason::kError;
      result.error = point.status().ToString();
      Finish(a);
      return;
    }
    a.rewind.emplace(std::move(*point));
  }
  a.decode_t0 = WorkerClock::now();
  const int64_t room = int64_t(options_.ctx_size) - int64_t(session.total_tokens());
  a.max_new = DecodeLimit(req, room);
  if (!SampleNext(a)) {
    Finish(a);
    return;
  }
  // A prompt read in steps is decoding in the planner already; one that needed no
  // evaluation (a live session with its logits) joins it with the sampled token.
  if (planner_.prompt_left(a.id) < 0) (void)planner_.Add(a.id, 1);
}

void Engine::PickDecodingRows() {
  // Each request's sampler and logits row are its own, so the rows' picks run side by side
  // (a 129k-entry row costs ~0.1 ms greedy and ~2 ms sampled on the host: serial, a step of
  // 64 rows would wait longer for its picks than for its GPU step). Constrained rows pick in
  // SampleNext (their masks share the worker's token trie).
  picking_.clear();
  for (size_t i = 0; i < rows_.size(); ++i) {
    Row& row = rows_[i];
    row.picked = -1;
    const ActiveRequest& a = *row.a;
    if (a.decoding && !a.constraint && a.sampled < a.max_new && !a.request.cancelled()) {
      picking_.push_back(i);
    }
  }
  if (picking_.empty()) return;
  auto pick = [this](size_t i) {
    Row& row = rows_[picking_[i]];
    ActiveRequest& a = *row.a;
    row.picked = PickNextToken(*a.output, *a.sampler, pool_.at(a.slot).logits());
  };
  if (picking_.size() == 1) return pick(0);
  if (!pick_pool_) {
    pick_pool_ = std::make_unique<ThreadPool>(
        int(std::clamp(std::thread::hardware_concurrency(), 1u, kMaxPickThreads)));
  }
  pick_pool_->ParallelFor(picking_.size(), 1, [&](size_t begin, size_t end, int) {
    for (size_t i = begin; i < end; ++i) pick(i);
  });
}

bool Engine::SampleNext(ActiveRequest& a, int32_t picked) {
  Session& session = pool_.at(a.slot);
  GenerationResult& result = *a.result;
  auto push = [&a](std::vector<GenerationEvent> events) {
    AttachLogprobs(a, &events);
    for (GenerationEvent& ev : events) a.request.Push(std::move(ev));
  };
  if (a.request.cancelled()) {
    a.finish = FinishReason::kCancelled;
    return false;
  }
  if (a.sampled >= a.max_new) {
    a.finish = FinishReason::kLength;
    return false;
  }
  KeepSampledRow(a.request.request(), session.logits());
  std::span<const float> logits = session.logits();
  if (a.constraint) {
    a.masked_logits.assign(logits.begin(), logits.end());
    if (a.constraint->Mask(a.masked_logits) == 0) {
      a.finish = FinishReason::kError;
      result.error = "no token can continue the structured output";
      return false;
    }
    logits = a.masked_logits;
  }
  const int32_t id =
      picked >= 0 && !a.constraint ? picked : PickNextToken(*a.output, *a.sampler, logits);
  ++a.sampled;
  result.ids.push_back(id);
  const WorkerClock::time_point now = WorkerClock::now();
  if (a.sampled == 1) {
    result.timing.first_token_ms = MsSince(a.decode_t0);
  } else {
    metrics_.RecordInterToken(
        std::chrono::duration<double, std::milli>(now - a.last_token).count());
  }
  a.last_token = now;
  const bool ends = id == tokenizer_.eos_id() && EosEndsDecode(a.request.request());
  if (const int top = a.request.request().logprobs; top >= 0 && !ends) {
    TokenLogprobs lp = LogprobsOf(session.logits(), id, top);
    TokenLogprob entry;
    entry.token = tokenizer_.TokenBytes(id);
    entry.logprob = lp.logprob;
    for (const auto& [alt, logprob] : lp.top)
      entry.top.emplace_back(tokenizer_.TokenBytes(alt), logprob);
    entry.reasoning = a.output->reasoning_open();
    result.logprobs.push_back(entry);
    a.unsent_logprobs.push_back(std::move(entry));
  }
  session.AddPending(id, tokenizer_.TokenBytes(id));
  if (ends) {
    a.finish = FinishReason::kStop;
    return false;
  }
  if (a.constraint) {
    (void)a.constraint->Accept(tokenizer_.TokenBytes(id));  // masked: it fits
    if (a.constraint->done() && a.request.request().constraint_prefix) a.constraint.reset();
  }
  ++result.completion_tokens;
  if (a.output->reasoning_open()) ++result.reasoning_tokens;
  Expected<std::string> piece = a.decoder->Push(id);
  if (piece.ok()) push(a.output->Feed(*piece));
  if (a.output->stopped()) {
    a.finish = FinishReason::kStop;
    return false;
  }
  if (a.output->tool_block_closed()) {
    a.finish = FinishReason::kToolCalls;
    return false;
  }
  if (a.constraint && a.constraint->done()) {
    a.finish = FinishReason::kStop;  // the value is complete: nothing may follow it
    return false;
  }
  if (a.sampled >= a.max_new && !a.request.request().eval.evaluate_last) {
    a.finish = FinishReason::kLength;
    return false;  // the last token stays pending: nobody may need its logits
  }
  return true;
}

void Engine::Finish(ActiveRequest& a) {
  Session& session = pool_.at(a.slot);
  const GenerationRequest& req = a.request.request();
  GenerationResult* result = a.result.get();
  auto push = [&a](std::vector<GenerationEvent> events) {
    AttachLogprobs(a, &events);
    for (GenerationEvent& ev : events) a.request.Push(std::move(ev));
  };
  push(a.output->Feed(a.decoder->Flush()));
  push(a.output->Finish());
  result->timing.decode_tokens = a.sampled;
  result->timing.decode_ms = MsSince(a.decode_t0);
  if (a.rewind) {
    if (Status st = a.rewind->Restore(session, &result->rewind); !st.ok()) {
      a.finish = FinishReason::kError;
      result->error = st.ToString();
    }
  }
  const std::string error = result->error;
  a.output->Complete(a.finish, result);
  if (!error.empty()) result->error = error;

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
  ev.result = a.result;
  a.request.Push(std::move(ev));
  Release(a);
}

void Engine::Step() {
  PollRemoteFetches(/*wait=*/active_.empty());
  // A prompt stops between chunks when its client goes away; a decoding request notices
  // after its row, before sampling (as the one-request loop did).
  for (size_t i = 0; i < active_.size();) {
    ActiveRequest& a = *active_[i];
    if (!a.decoding && a.request.cancelled()) {
      EndPrefill(a, Cancelled("client went away during prefill"));
      continue;
    }
    ++i;
  }
  const std::span<const PlannedChunk> plan = planner_.Next();
  if (plan.empty()) return;
  rows_.clear();
  chunks_.clear();
  int n_rows = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    const int64_t id = plan[k].id;
    const int planned = plan[k].n_tokens;
    ActiveRequest* a = FindActive(id);
    Session& s = pool_.at(a->slot);
    Row row;
    row.a = a;
    row.n = a->decoding ? s.pending().size() : size_t(planned);
    row.want_logits = true;
    if (!a->decoding) {
      // A snapshot point inside the chunk ends it there, with the logits the snapshot keeps.
      const int64_t pos = int64_t(s.tokens().size());
      const std::vector<int64_t>& points = a->save_points;
      while (a->next_point < points.size() && points[a->next_point] <= pos) ++a->next_point;
      if (a->next_point < points.size() && points[a->next_point] <= pos + int64_t(row.n)) {
        row.n = size_t(points[a->next_point] - pos);
        row.at_point = true;
        planner_.Shorten(id, int(row.n));
      }
      row.want_logits = row.n == s.pending().size() || row.at_point;
    }
    SessionChunk c;
    c.tokens = std::span<const int32_t>(s.pending().data(), row.n);
    c.state = &s.state();
    c.logits_for = row.want_logits ? LogitsFor::kLast : LogitsFor::kNone;
    c.logits = row.want_logits ? s.logits().data() : nullptr;
    if (float* kept = KeptLogitsRows(a->request.request(), a->decoding, row.n, n_vocab_)) {
      c.logits_for = LogitsFor::kAll;  // the session's row is copied from its last one
      c.logits = kept;
    }
    chunks_.push_back(c);
    rows_.push_back(row);
    n_rows += int(row.n);
  }
  const Status st = model_.ForwardBatch(chunks_);
  metrics_.RecordStep(int(rows_.size()), n_rows);
  if (const ExpertCache* cache = model_.expert_cache())
    metrics_.SetExpertCacheStats(cache->stats());
  if (!st.ok()) {
    // A failed step may have written part of any of its chunks: those states are unusable.
    for (const Row& row : rows_) {
      ActiveRequest& a = *row.a;
      Session& s = pool_.at(a.slot);
      spdlog::error("forward pass failed, dropping live session {}: {}", s.id(), st.ToString());
      (void)s.Reset(s.id());
      if (a.decoding) {
        a.finish = FinishReason::kError;
        a.result->error = st.ToString();
        Finish(a);
      } else {
        EndPrefill(a, st);
      }
    }
    return;
  }
  planner_.Commit();
  for (const Row& row : rows_) {
    ActiveRequest& a = *row.a;
    if (row.want_logits)
      CopyLastKeptRow(a.request.request(), a.decoding, pool_.at(a.slot).logits());
  }
  PickDecodingRows();
  for (const Row& row : rows_) {
    ActiveRequest& a = *row.a;
    Session& s = pool_.at(a.slot);
    s.CommitPending(row.n, row.want_logits);
    if (a.decoding) {
      if (!SampleNext(a, row.picked)) Finish(a);
      continue;
    }
    if (row.at_point) {
      const int64_t point = a.save_points[a.next_point];
      const bool anchor = std::find(a.anchors.begin(), a.anchors.end(), point) != a.anchors.end();
      SaveSession(s, anchor ? SaveReason::kCold : SaveReason::kContinued, /*visible=*/false);
      ++a.next_point;
    }
    a.prefill_done += int64_t(row.n);
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::kPrefill;
    ev.done = a.prefill_done;
    ev.total = a.prefill_total;
    a.request.Push(std::move(ev));
    LogPrefillProgress(a, a.slot);
    if (s.pending().empty()) StartDecode(a);
  }
}

}  // namespace flashkv
