#include "tensor/iq3_tables.h"

namespace flashkv {

// GGML's iq3xxs_grid.
const uint32_t kIq3xxsGrid[256] = {
#include "tensor/iq3xxs_grid.inc"
};

// GGML's iq3s_grid.
const uint32_t kIq3sGrid[512] = {
#include "tensor/iq3s_grid.inc"
};

}  // namespace flashkv
