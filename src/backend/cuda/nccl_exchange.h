// NcclRowExchange: RowExchange (backend/exchange.h) between the CudaBackends of one process,
// one per GPU, over NCCL (docs/MULTI_GPU.md "The exchange"): the moved rows are gathered into
// a staging buffer on the source device, sent with ncclSend / ncclRecv inside one NCCL group,
// and scattered into place on the destination. This first version runs them on streams of
// its own and brackets each move with host waits (Backend::Synchronize before, a stream sync
// after), so it needs nothing of CudaBackend beyond its public interface; issuing them on
// the backends' own streams (no host wait, graph-capturable) is the next step. Built only
// where NCCL is found, as its own library flashkv_backend_nccl (src/backend/cuda/
// CMakeLists.txt says why). Must not: choose rows or touch their bits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/exchange.h"

namespace flashkv {

class NcclRowExchange final : public RowExchange {
 public:
  // One communicator per backend (ncclCommInitAll; rank = index); devices[i] is the CUDA
  // ordinal backends[i] runs on, each device once. Sets NCCL_NVLS_ENABLE=0 first: NVLink
  // multicast stays off.
  static Expected<std::unique_ptr<NcclRowExchange>> Create(std::span<Backend* const> backends,
                                                           std::span<const int> devices);
  ~NcclRowExchange() override;

  // `from` and `to` must be backends given to Create (the same one: a device-local copy).
  Status MoveRows(Backend& from, DevPtr<const float> src, Backend& to, DevPtr<float> dst,
                  size_t row_floats, std::span<const RowMove> moves) override;

  struct Peer;  // nccl_exchange.cpp

 private:
  NcclRowExchange() = default;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<int32_t> src_rows_, dst_rows_;  // the move's rows, host side
};

}  // namespace flashkv
