// The model fingerprint stored in every snapshot: SHA1 over the GGUF's header, metadata
// and tensor table bytes (everything before the data section) and the first 256 bytes of
// every tensor's data (so two files with equal metadata but different weights — e.g.
// tiny models from different seeds — differ). Cheap: no full read of the weights.
// Must not: interpret metadata (any change of the bytes changes the fingerprint).
#pragma once

#include "gguf/gguf_file.h"
#include "util/sha1.h"
#include "util/status.h"

namespace flashkv {

// kInvalidArgument for a GgufFile not opened from a path.
Expected<Sha1Digest> ModelFingerprint(const GgufFile& file);

}  // namespace flashkv
