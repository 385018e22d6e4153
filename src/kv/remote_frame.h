// The framing of every value the shared KV tier stores (docs/KV_FORMAT.md "Remote tier"):
// a 48-byte header — magic, the model fingerprint, the part's index and the object's part
// count, the payload length and a CRC-32C over the header's first 44 bytes and the
// payload — then the payload. Large objects are split into parts (a Redis string holds at
// most 512 MiB). A reader checks all of it: a damaged value (bad magic, length, CRC, part
// number) is kCorrupt, another model's is kFailedPrecondition; neither is ever loaded.
// Must not: know keys or talk to a store (kv/remote_store.h does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/sha1.h"
#include "util/status.h"

namespace flashkv {

inline constexpr std::string_view kRemoteFrameMagic = "FKVREM01";
inline constexpr size_t kRemoteFrameBytes = 48;

struct RemotePart {
  uint32_t index = 0;
  uint32_t count = 1;
  std::string_view payload;  // a view into the value given to UnframeRemotePart
};

std::string FrameRemotePart(const Sha1Digest& model, uint32_t index, uint32_t count,
                            std::string_view payload);
// Checks `value` as part `want_index` of an object of this model.
Expected<RemotePart> UnframeRemotePart(std::string_view value, const Sha1Digest& model,
                                       uint32_t want_index);

}  // namespace flashkv
