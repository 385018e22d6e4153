// --prefill-chunk-solo: the prompt tokens a step takes while no session decodes
// (EngineOptions::prefill_chunk_solo). "auto" is kGpuSoloPrefillChunk on the CUDA backend —
// a Flash prefill in chunks of 8,192 runs ~12 % faster than in chunks of 2,048, each weight
// read once per chunk (docs/PERFORMANCE.md "Prefill: where issue #13 ends") — and the prefill
// chunk on the CPU, whose products gain little from longer chunks. Pure text and numbers, so
// testable without a model. Must not: touch the engine (the commands pass the result on).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

#include "util/status.h"

namespace flashkv::cli {

inline constexpr int kGpuSoloPrefillChunk = 8192;

// Adds --prefill-chunk-solo to `cmd`, read into `value` ("auto" or a whole number).
void AddPrefillChunkSoloFlag(CLI::App* cmd, std::string* value);

// The solo chunk for `value` beside --prefill-chunk `chunk` on the resolved `backend`
// ("cpu" | "cuda"): never below `chunk` (a smaller number means "as --prefill-chunk").
// kInvalidArgument, naming the flag, for anything but "auto" or a whole number >= 1.
Expected<int> ResolvePrefillChunkSolo(std::string_view value, int chunk, std::string_view backend);

}  // namespace flashkv::cli
