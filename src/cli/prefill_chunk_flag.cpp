#include "cli/prefill_chunk_flag.h"

#include <algorithm>
#include <limits>

#include "cli/auto_or_number.h"

namespace flashkv::cli {

void AddPrefillChunkSoloFlag(CLI::App* cmd, std::string* value) {
  cmd->add_option("--prefill-chunk-solo", *value,
                  "prompt tokens per step while no request is decoding (a longer step holds up "
                  "nobody then, and prefills faster); auto: 8192 on CUDA, --prefill-chunk on the "
                  "CPU; at most --prefill-chunk: off")
      ->capture_default_str();
}

Expected<int> ResolvePrefillChunkSolo(std::string_view value, int chunk, std::string_view backend) {
  FLASHKV_ASSIGN_OR_RETURN(const std::optional<uint64_t> n,
                           AutoOrNumber("--prefill-chunk-solo", value, 1));
  if (!n) return backend == "cuda" ? std::max(chunk, kGpuSoloPrefillChunk) : chunk;
  constexpr int kMost = std::numeric_limits<int>::max();  // a step's tokens are an int
  if (*n > uint64_t(kMost)) {
    return InvalidArgument("--prefill-chunk-solo must be at most {}, got '{}'", kMost, value);
  }
  return std::max(chunk, int(*n));
}

}  // namespace flashkv::cli
