// One libFuzzer target per entry of fuzz_targets.h, chosen at build time
// (FLASHKV_FUZZ_TARGET); built by `make fuzz` with clang's -fsanitize=fuzzer.
#include <cstddef>
#include <cstdint>

#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const flashkv::fuzz::Target* target = flashkv::fuzz::FindTarget(FLASHKV_FUZZ_TARGET);
  target->run({data, size});
  return 0;
}
