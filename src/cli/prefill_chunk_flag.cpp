#include "cli/prefill_chunk_flag.h"

#include <algorithm>
#include <charconv>

namespace flashkv::cli {

void AddPrefillChunkSoloFlag(CLI::App* cmd, std::string* value) {
  cmd->add_option("--prefill-chunk-solo", *value,
                  "prompt tokens per step while no request is decoding (a longer step holds up "
                  "nobody then, and prefills faster); auto: 8192 on CUDA, --prefill-chunk on the "
                  "CPU; at most --prefill-chunk: off")
      ->capture_default_str();
}

Expected<int> ResolvePrefillChunkSolo(std::string_view value, int chunk, std::string_view backend) {
  if (value == "auto") return backend == "cuda" ? std::max(chunk, kGpuSoloPrefillChunk) : chunk;
  int n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || n < 1) {
    return InvalidArgument("--prefill-chunk-solo must be auto or a whole number >= 1, got '{}'",
                           value);
  }
  return std::max(chunk, n);
}

}  // namespace flashkv::cli
