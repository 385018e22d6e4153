#include "kv_remote/remote_tier.h"

#include <algorithm>
#include <chrono>
#include <map>

#include <spdlog/spdlog.h>

#include "util/file_io.h"

namespace flashkv {
namespace {

using Clock = std::chrono::steady_clock;

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

// Exponential retry delays for one kind of failure, logged once per outage.
class RemoteTier::Backoff {
 public:
  Backoff(std::string what, int min_ms, int max_ms)
      : what_(std::move(what)), min_ms_(std::max(1, min_ms)), max_ms_(std::max(min_ms_, max_ms)) {}

  bool active() const { return active_; }
  bool Ready(Clock::time_point now) const { return !active_ || now >= retry_at_; }
  Clock::time_point retry_at() const { return retry_at_; }

  void Failed(const Status& st) {
    if (!active_) {
      spdlog::warn("kv remote: {} ({}); serving from the local tiers, retrying with backoff", what_,
                   st.message());
      delay_ms_ = min_ms_;
    } else {
      delay_ms_ = std::min(max_ms_, delay_ms_ * 2);
    }
    active_ = true;
    retry_at_ = Clock::now() + std::chrono::milliseconds(delay_ms_);
  }

  void Succeeded() {
    if (active_) spdlog::info("kv remote: {}: recovered", what_);
    active_ = false;
    delay_ms_ = min_ms_;
  }

 private:
  const std::string what_;
  const int min_ms_, max_ms_;
  bool active_ = false;
  int delay_ms_ = 0;
  Clock::time_point retry_at_{};
};

RemoteTier::RemoteTier(RemoteTierOptions options)
    : opt_(std::move(options)),
      fetch_store_(opt_.store),
      upload_store_(opt_.store),
      link_(std::make_unique<Backoff>(opt_.store.address.ToString() + " unreachable",
                                      opt_.backoff_min_ms, opt_.backoff_max_ms)),
      writes_(std::make_unique<Backoff>(opt_.store.address.ToString() + " refuses writes",
                                        opt_.backoff_min_ms, opt_.backoff_max_ms)) {
  thread_ = std::thread([this] { Loop(); });
}

RemoteTier::~RemoteTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RemoteTier::Enqueue(RemoteUpload upload) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= opt_.max_queued) {
      ++stats_.dropped;
      spdlog::debug("kv remote: upload queue full, entry {} not mirrored", upload.key);
      return;
    }
    queue_.push_back(std::move(upload));
  }
  cv_.notify_all();
}

bool RemoteTier::Flush(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return queue_.empty() && !uploading_; });
}

RemoteTierStats RemoteTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  RemoteTierStats s = stats_;
  s.queued = queue_.size();
  s.backoff = link_->active();
  s.writes_backoff = writes_->active();
  s.redirects = fetch_store_.redirects() + upload_store_.redirects();
  return s;
}

void RemoteTier::Failed(const Status& st, bool write) {
  // Called with mu_ held.
  if (st.code() == StatusCode::kResourceExhausted && write) {
    ++stats_.refused;
    writes_->Failed(st);
  } else {
    ++stats_.errors;
    link_->Failed(st);
  }
  cv_.notify_all();  // the uploader probes the link when its delay has passed
}

void RemoteTier::Refused(const Status& st, const std::string& key) {
  // Called with mu_ held. A poisoned value stays in the store and is met on every lookup
  // that names it: one warning per key, the count in /metrics.
  ++(st.code() == StatusCode::kFailedPrecondition ? stats_.foreign
     : st.code() == StatusCode::kUnsupported      ? stats_.unsigned_values
                                                  : stats_.damaged);
  if (refused_keys_.size() >= 4096) refused_keys_.clear();
  if (refused_keys_.insert(key).second) {
    spdlog::warn("kv remote: not loading entry {}: {}", key, st.ToString());
  } else {
    spdlog::debug("kv remote: not loading entry {}: {}", key, st.ToString());
  }
}

void RemoteTier::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const Clock::time_point now = Clock::now();
    const bool can_upload = !queue_.empty() && !link_->active() && writes_->Ready(now);
    const bool can_probe = link_->active() && link_->Ready(now);
    // At shutdown what is queued still goes while the store answers; an outage ends it.
    if (stop_ && !can_upload) return;
    if (can_probe) {
      lock.unlock();
      Status st = upload_store_.Ping();
      lock.lock();
      if (st.ok()) {
        link_->Succeeded();
      } else {
        Failed(st, false);
      }
      continue;
    }
    if (!can_upload) {
      if (link_->active()) {
        cv_.wait_until(lock, link_->retry_at());
      } else if (!queue_.empty()) {
        cv_.wait_until(lock, writes_->retry_at());
      } else {
        cv_.wait(lock);
      }
      continue;
    }
    const RemoteUpload job = queue_.front();
    uploading_ = true;
    lock.unlock();
    const Status st = Upload(job);
    lock.lock();
    uploading_ = false;
    if (st.ok()) {
      queue_.pop_front();
      ++stats_.uploads;
      writes_->Succeeded();
    } else if (st.code() == StatusCode::kIoError || st.code() == StatusCode::kResourceExhausted) {
      Failed(st, true);  // kept at the head: retried once the store is back
    } else {
      queue_.pop_front();
      ++stats_.upload_failures;
      spdlog::warn("kv remote: entry {} not mirrored: {}", job.key, st.ToString());
    }
    cv_.notify_all();
  }
}

Status RemoteTier::Upload(const RemoteUpload& u) {
  FLASHKV_ASSIGN_OR_RETURN(bool there, upload_store_.HasEntry(opt_.numerics, u.key));
  if (there) return Status::Ok();  // another server mirrored it first
  RemoteEntryRecord record;
  record.key = u.key;
  record.n_tokens = u.n_tokens;
  uint64_t written = 0;
  for (const std::string& path : u.paths) {
    Expected<std::string> bytes = ReadWholeFile(path);
    // Evicted locally since it was queued: nothing to mirror (not the store's fault).
    if (!bytes.ok()) return NotFound("{}", bytes.status().message());
    const std::string name = BaseName(path);
    FLASHKV_ASSIGN_OR_RETURN(bool have, upload_store_.HasObject(name, bytes->size()));
    if (!have) {
      FLASHKV_RETURN_IF_ERROR(upload_store_.PutObject(name, *bytes));
      written += bytes->size();
    }
    record.objects.emplace_back(name, bytes->size());
  }
  FLASHKV_RETURN_IF_ERROR(upload_store_.PutEntry(opt_.numerics, record));
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes_written += written;
  }
  spdlog::info("kv remote: mirrored entry {} ({} tokens, {} bytes written)", u.key, u.n_tokens,
               written);
  return Status::Ok();
}

Expected<RemoteFetched> RemoteTier::Fetch(
    std::span<const int32_t> tokens, int64_t min_tokens, int64_t max_tokens,
    const std::function<bool(std::string_view name, uint64_t bytes)>& have,
    const std::atomic<bool>* cancel, uint64_t max_bytes) {
  auto cancelled = [cancel] { return cancel != nullptr && cancel->load(); };
  auto miss = [this](Status why) -> Status {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    return NotFound("remote tier: {}", why.message());
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (link_->active()) {
      ++stats_.misses;
      return NotFound("remote tier unreachable (backing off)");
    }
  }
  // A store error: counted, the link backs off, the request goes on without the tier.
  auto link_error = [&](const Status& st) -> Status {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Failed(st, false);
    }
    return miss(st);
  };
  std::lock_guard<std::mutex> fetch_lock(fetch_mu_);
  const auto t0 = Clock::now();
  // One clock for the whole lookup: every command ends by it, however the store answers.
  const int fetch_ms =
      opt_.fetch_timeout_ms > 0 ? opt_.fetch_timeout_ms : opt_.store.command_timeout_ms;
  fetch_store_.SetDeadline(t0 + std::chrono::milliseconds(fetch_ms));
  struct ClearDeadline {
    RemoteStore& s;
    ~ClearDeadline() { s.ClearDeadline(); }
  } clear_deadline{fetch_store_};
  const int64_t hi = std::min<int64_t>({max_tokens, int64_t(tokens.size()), INT32_MAX});
  const int64_t lo = std::max<int64_t>(1, min_tokens);
  if (hi < lo) return miss(NotFound("prompt too short"));
  Expected<std::vector<uint32_t>> lengths =
      fetch_store_.Lengths(opt_.numerics, uint32_t(lo), uint32_t(hi), opt_.candidates);
  if (!lengths.ok()) {
    if (lengths.status().code() == StatusCode::kIoError) return link_error(lengths.status());
    {
      std::lock_guard<std::mutex> lock(mu_);
      Refused(lengths.status(), RemoteLengthsKey(opt_.store.model, opt_.numerics));
    }
    return miss(lengths.status());
  }
  if (lengths->empty()) return miss(NotFound("no entry of a fitting length"));
  // Every candidate's name in one pass over the prompt's ids.
  std::vector<uint32_t> ascending = *lengths;
  std::sort(ascending.begin(), ascending.end());
  std::map<uint32_t, std::string> names;
  Sha1 h;
  size_t done = 0;
  for (uint32_t n : ascending) {
    h.Update(tokens.data() + done, (n - done) * sizeof(int32_t));
    done = n;
    names[n] = Sha1Hex(h.Peek());
  }
  for (uint32_t n : *lengths) {
    if (cancelled()) return Cancelled("remote fetch cancelled");
    // Damage or another model's value: never loaded, counted, the next candidate tried.
    auto checked = [&](const Status& st) {
      std::lock_guard<std::mutex> lock(mu_);
      Refused(st, names[n]);
    };
    Expected<RemoteEntryRecord> rec = fetch_store_.GetEntry(opt_.numerics, names[n]);
    if (!rec.ok()) {
      if (rec.status().code() == StatusCode::kNotFound) continue;  // a longer prompt's
      if (rec.status().code() == StatusCode::kIoError) return link_error(rec.status());
      checked(rec.status());
      continue;
    }
    if (rec->n_tokens != n) {
      checked(Corrupt("entry {} says {} tokens, indexed under {}", rec->key, rec->n_tokens, n));
      continue;
    }
    uint64_t total = 0;
    for (const auto& object : rec->objects) {
      total = object.second > UINT64_MAX - total ? UINT64_MAX : total + object.second;
    }
    if (total > max_bytes) {
      checked(Corrupt("entry {} is {} bytes, more than the {} this cache can keep", rec->key, total,
                      max_bytes));
      continue;
    }
    RemoteFetched out;
    out.key = rec->key;
    out.n_tokens = n;
    Status bad;
    for (const auto& [name, bytes] : rec->objects) {
      if (have && have(name, bytes)) continue;
      if (cancelled()) return Cancelled("remote fetch cancelled");
      Expected<std::string> obj = fetch_store_.GetObject(name, bytes);
      if (!obj.ok()) {
        bad = obj.status();
        break;
      }
      out.bytes += obj->size();
      out.objects.push_back(RemoteObject{name, std::move(*obj)});
    }
    if (!bad.ok()) {
      if (bad.code() == StatusCode::kIoError) return link_error(bad);
      if (bad.code() == StatusCode::kNotFound) {
        bad = Corrupt("entry {}: {}", rec->key, bad.message());  // evicted by the store
      }
      checked(bad);
      continue;
    }
    out.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.hits;
      stats_.bytes_read += out.bytes;
    }
    spdlog::info("kv remote hit tokens={} bytes={} fetch={:.1f} ms ({:.0f} MiB/s)", n, out.bytes,
                 out.ms, double(out.bytes) / 1048576.0 / std::max(out.ms / 1000.0, 1e-9));
    return out;
  }
  return miss(NotFound("no usable entry among {} candidate(s)", lengths->size()));
}

}  // namespace flashkv
