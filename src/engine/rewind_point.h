// RewindPoint: a session's state at one moment kept in host memory (the snapshot image,
// its ids and text), so a probe decode can run on the live session and the session then
// be put back exactly where it was (EvaluationOptions::rewind, engine/evaluation.h). The
// image is the `.kv` format (snapshot/snapshot_codec.h) without text, sealed as a disk save
// would be, so its size and times are what parking that state costs. Must not: pick
// when to rewind (the engine's decode does) or write files.
//
// Threading: the engine worker's alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/evaluation.h"
#include "engine/session.h"
#include "snapshot/snapshot_codec.h"
#include "util/status.h"

namespace flashkv {

class RewindPoint {
 public:
  // The session as it is: evaluated ids, their text and valid logits, nothing pending
  // (kFailedPrecondition otherwise). Sets timing->snapshot_bytes and save_ms.
  static Expected<RewindPoint> Capture(const Session& session, RewindTiming* timing);

  // Puts `session` back to the captured moment, bit-exact (its pending ids and visible
  // keys are dropped; its save schedule is kept). Sets timing->restore_ms. On an error the
  // session is reset, as after a failed restore of any tier.
  Status Restore(Session& session, RewindTiming* timing) const;

 private:
  RewindPoint(SnapshotImage image, std::vector<int32_t> tokens, std::string text)
      : image_(std::move(image)), tokens_(std::move(tokens)), text_(std::move(text)) {}

  SnapshotImage image_;
  std::vector<int32_t> tokens_;
  std::string text_;
};

}  // namespace flashkv
