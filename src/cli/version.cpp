#include "cli/version.h"

#include <fmt/format.h>

#include "cli/build_info.h"

namespace flashkv::cli {

std::string VersionText() {
  std::string cuda = std::string(FLASHKV_BUILD_CUDA) == "on"
                         ? fmt::format("CUDA on: sm {}", FLASHKV_BUILD_CUDA_ARCHS)
                         : std::string("CUDA off");
  std::string sanitize = std::string(FLASHKV_BUILD_SANITIZE) == "ON" ? ", ASan+UBSan" : "";
  return fmt::format("flashkv {} (commit {}, {}, {}{}, {})", FLASHKV_BUILD_VERSION,
                     FLASHKV_BUILD_COMMIT, FLASHKV_BUILD_TYPE, cuda, sanitize,
                     FLASHKV_BUILD_COMPILER);
}

}  // namespace flashkv::cli
