#include "cli/auto_or_number.h"

#include <charconv>

namespace flashkv::cli {

Expected<std::optional<uint64_t>> AutoOrNumber(std::string_view flag, std::string_view value,
                                               uint64_t min) {
  if (value == "auto") return std::optional<uint64_t>();
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < min) {
    return InvalidArgument("{} must be auto or a whole number >= {}, got '{}'", flag, min, value);
  }
  return std::optional<uint64_t>(n);
}

}  // namespace flashkv::cli
