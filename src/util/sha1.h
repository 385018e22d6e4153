// SHA-1 digests (OpenSSL), for cache file names (the SHA1 of a snapshot's token ids) and
// model fingerprints. Identification only, never security. Must not: know about models or
// files.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace flashkv {

using Sha1Digest = std::array<uint8_t, 20>;

// Incremental SHA-1. Not thread-safe; one per hashing job.
class Sha1 {
 public:
  Sha1();
  ~Sha1();
  Sha1(const Sha1&) = delete;
  Sha1& operator=(const Sha1&) = delete;

  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // The digest of everything updated so far; the hasher is then reset for reuse.
  Sha1Digest Final();
  // The digest of everything updated so far, leaving the hasher as it is: the digests of
  // every prefix of one byte stream (the remote tier's candidates) in one pass.
  Sha1Digest Peek() const;

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

Sha1Digest Sha1Of(std::string_view bytes);
// 40 lowercase hex digits.
std::string Sha1Hex(const Sha1Digest& digest);
// Parses 40 hex digits (either case); false if `hex` is anything else.
bool ParseSha1Hex(std::string_view hex, Sha1Digest* out);

}  // namespace flashkv
