#include "kv_remote/remote_frame.h"

#include <cstring>

#include "util/crc32c.h"
#include "util/hmac_sha256.h"

namespace flashkv {
namespace {

constexpr size_t kModelAt = 8, kIndexAt = 28, kCountAt = 32, kLengthAt = 36, kCrcAt = 44;

template <typename T>
void Put(std::string& s, size_t at, T v) {
  // Little-endian on the hosts flashkv builds for (x86-64, aarch64), as the .kv format.
  std::memcpy(s.data() + at, &v, sizeof v);
}

template <typename T>
T Get(std::string_view s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof v);
  return v;
}

uint32_t FrameCrc(std::string_view header, std::string_view payload) {
  return Crc32c(Crc32c(0, header.data(), kCrcAt), payload.data(), payload.size());
}

HmacSha256Digest FrameMac(std::string_view secret, std::string_view key, std::string_view frame) {
  // The key's length first: (key, frame) pairs never collide across the boundary.
  const uint64_t key_len = key.size();
  return HmacSha256(secret,
                    {std::string_view(reinterpret_cast<const char*>(&key_len), 8), key, frame});
}

}  // namespace

std::string FrameRemotePart(const Sha1Digest& model, uint32_t index, uint32_t count,
                            std::string_view payload, std::string_view secret,
                            std::string_view key) {
  const bool sign = !secret.empty();
  std::string v(kRemoteFrameBytes + payload.size(), '\0');
  const std::string_view magic = sign ? kRemoteSignedMagic : kRemoteFrameMagic;
  std::memcpy(v.data(), magic.data(), magic.size());
  std::memcpy(v.data() + kModelAt, model.data(), model.size());
  Put<uint32_t>(v, kIndexAt, index);
  Put<uint32_t>(v, kCountAt, count);
  Put<uint64_t>(v, kLengthAt, payload.size());
  std::memcpy(v.data() + kRemoteFrameBytes, payload.data(), payload.size());
  Put<uint32_t>(v, kCrcAt, FrameCrc(v, payload));
  if (sign) {
    const HmacSha256Digest mac = FrameMac(secret, key, v);
    v.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  }
  return v;
}

Expected<RemotePart> UnframeRemotePart(std::string_view value, const Sha1Digest& model,
                                       uint32_t want_index, std::string_view secret,
                                       std::string_view key) {
  if (value.size() < kRemoteFrameBytes) {
    return Corrupt("remote value of {} bytes is shorter than its header", value.size());
  }
  const std::string_view magic = value.substr(0, kRemoteFrameMagic.size());
  const bool is_signed = magic == kRemoteSignedMagic;
  if (magic != kRemoteFrameMagic && !is_signed) {
    return Corrupt("remote value has no flashkv header");
  }
  if (is_signed) {
    if (value.size() < kRemoteFrameBytes + kRemoteSignatureBytes) {
      return Corrupt("signed remote value of {} bytes is shorter than its header", value.size());
    }
    const std::string_view mac = value.substr(value.size() - kRemoteSignatureBytes);
    value.remove_suffix(kRemoteSignatureBytes);
    if (!secret.empty() && !DigestsEqual(FrameMac(secret, key, value), mac)) {
      return Unsupported("remote value is not signed with this tier's key");
    }
  } else if (!secret.empty()) {
    return Unsupported("remote value is unsigned; this tier's values must be signed");
  }
  RemotePart p;
  p.index = Get<uint32_t>(value, kIndexAt);
  p.count = Get<uint32_t>(value, kCountAt);
  const uint64_t length = Get<uint64_t>(value, kLengthAt);
  if (length != value.size() - kRemoteFrameBytes) {
    return Corrupt("remote value says {} payload bytes, holds {}", length,
                   value.size() - kRemoteFrameBytes);
  }
  p.payload = value.substr(kRemoteFrameBytes);
  if (Get<uint32_t>(value, kCrcAt) != FrameCrc(value, p.payload)) {
    return Corrupt("remote value fails its CRC-32C");
  }
  if (p.count == 0 || p.index != want_index || p.index >= p.count) {
    return Corrupt("remote value is part {} of {}, expected part {}", p.index, p.count, want_index);
  }
  if (std::memcmp(value.data() + kModelAt, model.data(), model.size()) != 0) {
    return FailedPrecondition("remote value belongs to another model");
  }
  return p;
}

}  // namespace flashkv
