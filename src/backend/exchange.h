// RowExchange: moves rows of floats between the backends of one sharded model (expert
// parallel, docs/MULTI_GPU.md). The CUDA build implements it with NCCL point-to-point sends
// inside one group; HostRowExchange below, for backends whose memory the host reaches through
// Read/Write (several CPU backends in one process), with plain copies through host memory.
// Must not: choose which rows move (the model's shard plan does) or change a row's bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace flashkv {

// Row src_row of the source goes to row dst_row of the destination.
struct RowMove {
  int32_t src_row = 0;
  int32_t dst_row = 0;
};

class RowExchange {
 public:
  virtual ~RowExchange() = default;
  // Copies row m.src_row of `src` (rows of row_floats floats on backend `from`) to row
  // m.dst_row of `dst` (on backend `to`) for every m in `moves`, bits unchanged. Sees every
  // op queued on `from` before the call; ops queued on `to` after it see the rows.
  virtual Status MoveRows(Backend& from, DevPtr<const float> src, Backend& to, DevPtr<float> dst,
                          size_t row_floats, std::span<const RowMove> moves) = 0;
};

// Plain copies through a host staging buffer: Read from `from`, Write to `to`.
class HostRowExchange final : public RowExchange {
 public:
  Status MoveRows(Backend& from, DevPtr<const float> src, Backend& to, DevPtr<float> dst,
                  size_t row_floats, std::span<const RowMove> moves) override;

 private:
  std::vector<float> staging_;  // reused between calls
};

}  // namespace flashkv
