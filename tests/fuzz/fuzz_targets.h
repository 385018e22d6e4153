// The parsers a model file, a cache file, a client or the model's own output can reach,
// one entry point each, shared by the seeded mutation fuzzer CTest runs (mutation_fuzz.cpp)
// and the libFuzzer targets `make fuzz` builds (libfuzzer_main.cpp). Each feeds arbitrary
// bytes to the real parser and touches everything a caller could reach from what it
// accepted: any error Status is fine; a crash, a hang or a sanitizer report is a bug.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace flashkv::fuzz {

using Input = std::span<const uint8_t>;
using Bytes = std::vector<uint8_t>;

struct Target {
  std::string_view name;
  // How deep the input got: 0 rejected by the first parser, then one more for each
  // further stage that accepted it. The mutation fuzzer keeps inputs that get as deep as
  // the input they came from, as bases for further mutations.
  int (*run)(Input);
  std::vector<Bytes> (*seeds)();  // valid inputs to start mutating from
};

// gguf: GgufFile::FromBytes, every getter on every key, every tensor byte, then
//   ModelConfig::FromGguf and the tokenizer built from the file's vocabulary.
// kv: a .kv snapshot's header, cache scan, full verification and a load into a state
//   (version-1 files and version-2 manifests).
// kvchunk: a version-2 chunk file's header and payload CRC, and a manifest's chunk list.
// request: an API request body (its first byte picks the dialect) through ReadApiRequest
//   and the prompt renderer, as every generation endpoint does.
// dsml: model output (its first byte picks thinking/tools and the chunk size) through the
//   output parser and all three dialects' response bodies.
// safetensors: a safetensors file's header and tensor views.
// remote: a shared-tier value (its first byte picks the reader): a frame unsigned or signed
//   and the entry record inside it, or a RESP reply through the bounded, deadline-held
//   reader (kv_remote/remote_command.h) from a socket.
const std::vector<Target>& Targets();
const Target* FindTarget(std::string_view name);

}  // namespace flashkv::fuzz
