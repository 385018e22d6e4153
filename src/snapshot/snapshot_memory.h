// Restoring a snapshot that is still in host memory: a SnapshotImage (from CaptureSnapshot)
// written back into a KvState without a file. Used where a live state is parked in RAM and
// brought back (the bench's probe-and-restore at each frontier; an in-memory checkpoint
// tier). Same guarantees as LoadSnapshot (snapshot/snapshot_codec.h): identity and shape are
// checked before any byte reaches the state, a sealed image's CRCs are verified, a failure
// part way clears the state, and the restore is bit-exact. Must not: pick policy, touch
// files, or run the model.
//
// Separate from snapshot_codec.h because the codec's loader is built around streaming a
// file through staging buffers; this path needs none of that.
//
// Threading: the state must not be used by another thread during the restore.
#pragma once

#include <cstdint>
#include <vector>

#include "snapshot/snapshot_codec.h"
#include "state/kv_state.h"
#include "util/status.h"

namespace flashkv {

struct RestoredSnapshot {
  std::vector<float> logits;  // [n_vocab] next-token logits after the image's tokens
  uint64_t layer_bytes = 0;   // bytes written into the state (the layer sections)
};

// Writes `image` into `state` (any context >= its token count; previous contents are
// replaced). A sealed image has every section's CRC verified first (as a file load
// would); an unsealed one (fresh from CaptureSnapshot) is trusted as captured. Errors:
// kFailedPrecondition for another model or shape, kCorrupt for a CRC mismatch; on any
// error `state` is cleared.
Expected<RestoredSnapshot> RestoreSnapshotImage(const SnapshotImage& image,
                                                const SnapshotIdentity& identity, KvState& state);

}  // namespace flashkv
