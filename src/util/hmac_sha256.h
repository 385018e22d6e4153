// HMAC-SHA-256 (RFC 2104) on OpenSSL's EVP_MAC, for values that must prove who wrote them
// (the shared KV tier's signed frames, kv_remote/remote_frame.h). Digests compare in constant
// time. Must not: hold the key longer than the object that was given it.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace flashkv {

using HmacSha256Digest = std::array<uint8_t, 32>;

// The MAC under `key` of the concatenation of `parts`.
HmacSha256Digest HmacSha256(std::string_view key, std::initializer_list<std::string_view> parts);

// a == b without an early exit (a forger learns nothing from the time a refusal takes).
bool DigestsEqual(const HmacSha256Digest& a, std::string_view b);

}  // namespace flashkv
