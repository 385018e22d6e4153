// Flags whose value is "auto" or a whole number (--kv-live-sessions, --kv-ram-space-mb,
// --http-client-connections, --prefill-chunk-solo): one parser, so they accept and refuse the
// same spellings with the same message. Must not: know what the number means.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "util/status.h"

namespace flashkv::cli {

// nullopt for "auto", else the number; kInvalidArgument naming `flag` for anything but "auto"
// or a whole number >= `min` (no sign, spaces or fraction).
Expected<std::optional<uint64_t>> AutoOrNumber(std::string_view flag, std::string_view value,
                                               uint64_t min);

}  // namespace flashkv::cli
