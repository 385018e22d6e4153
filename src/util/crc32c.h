// CRC-32C (Castagnoli, the iSCSI / ext4 / RocksDB checksum), for snapshot sections. Uses
// the SSE4.2 crc32 instruction when the CPU has it (checked once at run time, so builds
// without -march=native are fast too), else a portable slice-by-8 table. Must not: know
// about files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flashkv {

// Extends `crc` (the value returned for the bytes before) with `n` more bytes. Start with
// 0: Crc32c(0, "123456789", 9) == 0xE3069283.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(std::string_view s) {
  return Crc32c(0, s.data(), s.size());
}

// The portable path, exposed so tests can check both paths agree.
uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t n);
bool Crc32cIsHardware();

}  // namespace flashkv
