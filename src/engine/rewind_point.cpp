#include "engine/rewind_point.h"

#include <algorithm>
#include <chrono>

#include "engine/worker_clock.h"
#include "snapshot/snapshot_memory.h"

namespace flashkv {
namespace {

// The image never leaves this process, so it only has to name itself consistently.
const SnapshotIdentity& RewindIdentity() {
  static const SnapshotIdentity id{Sha1Digest{}, "rewind"};
  return id;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Expected<RewindPoint> RewindPoint::Capture(const Session& session, RewindTiming* timing) {
  if (!session.has_logits()) {
    return FailedPrecondition("a rewind point needs a session with its logits and nothing pending");
  }
  SnapshotContent content;
  content.tokens = session.tokens();
  content.logits = session.logits();
  content.reason = SaveReason::kManual;
  const WorkerClock::time_point t0 = WorkerClock::now();
  FLASHKV_ASSIGN_OR_RETURN(SnapshotImage image,
                           CaptureSnapshot(session.state(), RewindIdentity(), content, NowMs()));
  SealSnapshot(image);
  timing->save_ms = MsSince(t0);
  timing->snapshot_bytes = image.size();
  return RewindPoint(std::move(image), session.tokens(), session.text());
}

Status RewindPoint::Restore(Session& session, RewindTiming* timing) const {
  const WorkerClock::time_point t0 = WorkerClock::now();
  Expected<RestoredSnapshot> restored =
      RestoreSnapshotImage(image_, RewindIdentity(), session.state());
  if (!restored.ok()) {
    (void)session.Reset(session.id());
    return restored.status().WithContext("rewinding the session");
  }
  timing->restore_ms = MsSince(t0);
  const int64_t last_saved = session.last_saved_tokens();
  session.AdoptRestored(tokens_, text_, restored->logits);
  session.set_last_saved_tokens(std::min<int64_t>(last_saved, int64_t(tokens_.size())));
  return Status::Ok();
}

}  // namespace flashkv
