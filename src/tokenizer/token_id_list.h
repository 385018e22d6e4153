// Parsing and printing token id lists as people type them on a command line or paste
// them from JSON: "1 2 3", "1,2,3", "[1, 2, 3]". Used by `flashkv detokenize` and tests.
// Must not: check ids against a vocabulary (Decode does).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace flashkv {

// Integers separated by whitespace and/or commas, optionally inside one pair of [ ].
// InvalidArgument naming the offending text and its byte offset otherwise.
Expected<std::vector<int32_t>> ParseTokenIdList(std::string_view text);

// "1 2 3"
std::string FormatTokenIdList(std::span<const int32_t> ids);

}  // namespace flashkv
