// The remote tier off the worker thread (engine.h, kv_remote/remote_fetcher.h): a request that
// missed the local tiers holds its empty slot while the lookup thread asks the shared
// store and keeps what it finds on disk; the worker goes on stepping everyone else, takes
// the result between steps, restores a hit from the disk (RemoteCacheTier::RestoreKept,
// then Engine::AdoptHit as every tier) or prefills a miss from the first token, and ends a
// request whose client left meanwhile.
#include <spdlog/spdlog.h>

#include "engine/engine.h"
#include "engine/worker_clock.h"

namespace flashkv {

void Engine::StartRemoteFetch(std::unique_ptr<ActiveRequest> owned, const Resume& resume) {
  const GenerationRequest& req = owned->request.request();
  Fetching f;
  f.resume = resume;
  f.t0 = WorkerClock::now();
  f.ticket =
      fetcher_->Start(req.prompt_tokens, options_.policy.min_load_tokens(), options_.ctx_size - 1);
  f.a = std::move(owned);
  fetching_.push_back(std::move(f));
}

void Engine::PollRemoteFetches(bool wait) {
  if (fetching_.empty()) return;
  if (wait) fetcher_->WaitForResult(std::chrono::milliseconds(20));
  for (size_t i = 0; i < fetching_.size();) {
    Fetching& f = fetching_[i];
    RequestHandle& request = f.a->request;
    if (request.cancelled()) {
      fetcher_->Cancel(f.ticket);
      pool_.at(f.resume.slot).set_in_use(false);  // empty: the next request may take it
      spdlog::info("request cancelled while the shared store was asked ({:.1f} ms)", MsSince(f.t0));
      metrics_.RecordOutcome(EngineMetrics::Outcome::kCancelled);
      request.Push(ErrorEvent(Cancelled("client went away during the remote lookup")));
      fetching_.erase(fetching_.begin() + ptrdiff_t(i));
      continue;
    }
    std::optional<Expected<RemoteKept>> done = fetcher_->Take(f.ticket);
    if (!done) {
      ++i;
      continue;
    }
    std::unique_ptr<ActiveRequest> owned = std::move(f.a);
    Resume r = f.resume;
    const double waited_ms = MsSince(f.t0);
    fetching_.erase(fetching_.begin() + ptrdiff_t(i));
    r.remote_pending = false;
    const GenerationRequest& req = owned->request.request();
    Expected<TierOutcome> outcome = TierOutcome::kMiss;
    if (done->ok()) {
      const ResumeLookup lookup = LookupFor(req);
      outcome =
          AdoptHit(CacheSource::kRemote, req, lookup,
                   shared_->RestoreKept(lookup, **done, pool_.at(r.slot).state()), r.slot, &r);
    }
    if (!outcome.ok()) {
      pool_.at(r.slot).set_in_use(false);
      metrics_.RecordOutcome(EngineMetrics::Outcome::kFailed);
      owned->request.Push(ErrorEvent(outcome.status()));
      continue;
    }
    if (*outcome == TierOutcome::kRestored) {
      r.cache.restore_ms = waited_ms;  // the request's wait: queued fetch, import, load
    } else {
      if (!done->ok() && done->status().code() != StatusCode::kNotFound) {
        spdlog::warn("kv: remote lookup failed: {}", done->status().ToString());
      }
      // The wait for the miss sits on the time to first token as queueing does.
      owned->result->timing.queue_ms += waited_ms;
      ColdStart(req, &r);
    }
    Begin(std::move(owned), r);
  }
}

}  // namespace flashkv
