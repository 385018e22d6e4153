// The framing of every value the shared KV tier stores (docs/KV_FORMAT.md "Remote tier"):
// a 48-byte header — magic, the model fingerprint, the part's index and the object's part
// count, the payload length and a CRC-32C over the header's first 44 bytes and the
// payload — then the payload. Large objects are split into parts (a Redis string holds at
// most 512 MiB). A reader checks all of it: a damaged value (bad magic, length, CRC, part
// number) is kCorrupt, another model's is kFailedPrecondition; neither is ever loaded.
//
// Signed frames (--kv-remote-key-file, docs/KV_FORMAT.md "Trust model"): magic FKVREMS1,
// the same header and payload, then 32 bytes of HMAC-SHA-256 under the shared secret over
// (the store key the value is written under, header, payload) — so a value is neither
// forged nor moved to another key by anyone without the secret. A reader with a secret
// refuses unsigned and wrongly signed values (kUnsupported); one without reads both kinds,
// trusting the store as before.
// Must not: know keys or talk to a store (kv_remote/remote_store.h does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/sha1.h"
#include "util/status.h"

namespace flashkv {

inline constexpr std::string_view kRemoteFrameMagic = "FKVREM01";
inline constexpr std::string_view kRemoteSignedMagic = "FKVREMS1";
inline constexpr size_t kRemoteFrameBytes = 48;
inline constexpr size_t kRemoteSignatureBytes = 32;

struct RemotePart {
  uint32_t index = 0;
  uint32_t count = 1;
  std::string_view payload;  // a view into the value given to UnframeRemotePart
};

// `secret` non-empty: a signed frame for the store key `key`.
std::string FrameRemotePart(const Sha1Digest& model, uint32_t index, uint32_t count,
                            std::string_view payload, std::string_view secret = {},
                            std::string_view key = {});
// Checks `value` (read from store key `key`) as part `want_index` of an object of this
// model; with a `secret`, that it is signed with it for that key.
Expected<RemotePart> UnframeRemotePart(std::string_view value, const Sha1Digest& model,
                                       uint32_t want_index, std::string_view secret = {},
                                       std::string_view key = {});

}  // namespace flashkv
