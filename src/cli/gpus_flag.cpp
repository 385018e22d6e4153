#include "cli/gpus_flag.h"

#include <algorithm>
#include <charconv>

namespace flashkv::cli {

Expected<std::vector<int>> ParseGpus(std::string_view spec, int device_count,
                                     std::string_view why_none) {
  auto malformed = [&] {
    return InvalidArgument(
        "--gpus must be auto or a comma-separated list of device numbers, got '{}'", spec);
  };
  if (spec.empty()) return malformed();
  std::vector<int> out;
  if (spec != "auto") {
    size_t at = 0;
    while (true) {
      const size_t comma = std::min(spec.find(',', at), spec.size());
      const std::string_view item = spec.substr(at, comma - at);
      int d = -1;
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), d);
      if (item.empty() || ec != std::errc() || end != item.data() + item.size() || d < 0) {
        return malformed();
      }
      if (std::find(out.begin(), out.end(), d) != out.end()) {
        return InvalidArgument("--gpus: device {} is listed twice", d);
      }
      out.push_back(d);
      if (comma == spec.size()) break;
      at = comma + 1;
    }
  }
  // The list is well-formed; now against the devices present.
  if (device_count <= 0) return Unsupported("--gpus {}: no CUDA device ({})", spec, why_none);
  if (spec == "auto") {
    for (int d = 0; d < device_count; ++d) out.push_back(d);
    return out;
  }
  for (int d : out) {
    if (d >= device_count) {
      return InvalidArgument("--gpus: device {} does not exist ({} CUDA device{} present)", d,
                             device_count, device_count == 1 ? "" : "s");
    }
  }
  return out;
}

}  // namespace flashkv::cli
