#include "tensor/iq1_tables.h"

namespace flashkv {

// GGML's iq1s_grid (every byte 0xff, 0x00 or 0x01).
const uint64_t kIq1sGrid[2048] = {
#include "tensor/iq1s_grid.inc"
};

}  // namespace flashkv
