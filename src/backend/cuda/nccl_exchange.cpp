#include "backend/cuda/nccl_exchange.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <cstdlib>

#include "backend/cuda/nccl_exchange_rows.h"

namespace flashkv {

struct NcclRowExchange::Peer {
  Backend* be = nullptr;
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  // Device row indices of a move: [0] the rows it gathers here, [1] the rows it scatters.
  std::array<void*, 2> rows{};
  std::array<size_t, 2> rows_bytes{};
  void* stage = nullptr;  // device: the moved rows, contiguous
  size_t stage_bytes = 0;

  ~Peer() {
    cudaSetDevice(device);
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (void* r : rows) {
      if (r != nullptr) cudaFree(r);
    }
    if (stage != nullptr) cudaFree(stage);
    if (comm != nullptr) ncclCommDestroy(comm);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

namespace {

Status NcclStatus(const char* what, ncclResult_t r) {
  return Internal("{}: NCCL error {} ({})", what, int(r), ncclGetErrorString(r));
}

Status CudaError(const char* what, cudaError_t e) {
  return Internal("{}: CUDA error {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

// Grows a device buffer of the peer's (current) device; its stream is idle between moves.
Status Grow(void** buf, size_t* have, size_t bytes) {
  if (*have >= bytes) return Status::Ok();
  if (*buf != nullptr) cudaFree(*buf);
  *buf = nullptr;
  *have = 0;
  const size_t want = bytes + bytes / 4;
  if (cudaError_t e = cudaMalloc(buf, want); e != cudaSuccess) {
    return CudaError("allocating exchange buffers", e);
  }
  *have = want;
  return Status::Ok();
}

// Makes the peer's device current and uploads `rows` into its index buffer `which`.
Status Upload(NcclRowExchange::Peer& p, std::span<const int32_t> rows, int which) {
  if (cudaError_t e = cudaSetDevice(p.device); e != cudaSuccess) {
    return CudaError("cudaSetDevice", e);
  }
  const size_t w = size_t(which);
  FLASHKV_RETURN_IF_ERROR(Grow(&p.rows[w], &p.rows_bytes[w], rows.size_bytes()));
  if (cudaError_t e = cudaMemcpyAsync(p.rows[w], rows.data(), rows.size_bytes(),
                                      cudaMemcpyHostToDevice, p.stream);
      e != cudaSuccess) {
    return CudaError("uploading exchange rows", e);
  }
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<NcclRowExchange>> NcclRowExchange::Create(
    std::span<Backend* const> backends, std::span<const int> devices) {
  if (backends.empty() || backends.size() != devices.size()) {
    return InvalidArgument("NCCL exchange: {} backends for {} devices", backends.size(),
                           devices.size());
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (backends[i] == nullptr) return InvalidArgument("NCCL exchange: backend {} is null", i);
    for (size_t j = 0; j < i; ++j) {
      if (devices[j] == devices[i]) {
        return InvalidArgument("NCCL exchange: device {} given twice", devices[i]);
      }
    }
  }
  // NVLink multicast (NVLS) stays off on the machines flashkv runs on (docs/MULTI_GPU.md).
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  std::vector<ncclComm_t> comms(backends.size());
  if (ncclResult_t r = ncclCommInitAll(comms.data(), int(comms.size()), devices.data());
      r != ncclSuccess) {
    return NcclStatus("ncclCommInitAll", r);
  }
  std::unique_ptr<NcclRowExchange> x(new NcclRowExchange());
  for (size_t i = 0; i < backends.size(); ++i) {
    auto p = std::make_unique<Peer>();
    p->be = backends[i];
    p->device = devices[i];
    p->comm = comms[i];
    x->peers_.push_back(std::move(p));
  }
  for (auto& p : x->peers_) {
    cudaError_t e = cudaSetDevice(p->device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) return CudaError("creating an exchange stream", e);
  }
  return x;
}

NcclRowExchange::~NcclRowExchange() = default;

Status NcclRowExchange::MoveRows(Backend& from, DevPtr<const float> src, Backend& to,
                                 DevPtr<float> dst, size_t row_floats,
                                 std::span<const RowMove> moves) {
  if (moves.empty()) return Status::Ok();
  int a = -1, b = -1;
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (peers_[i]->be == &from) a = int(i);
    if (peers_[i]->be == &to) b = int(i);
  }
  if (a < 0 || b < 0) return InvalidArgument("NCCL exchange: a backend outside the exchange");
  Peer& pa = *peers_[size_t(a)];
  Peer& pb = *peers_[size_t(b)];
  const size_t n = moves.size();
  const size_t count = n * row_floats;
  src_rows_.resize(n);
  dst_rows_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (moves[i].src_row < 0 || moves[i].dst_row < 0) {
      return InvalidArgument("row exchange: move {} has a negative row", i);
    }
    src_rows_[i] = moves[i].src_row;
    dst_rows_[i] = moves[i].dst_row;
  }

  // The rows read and written are final and unused once both backends are idle.
  FLASHKV_RETURN_IF_ERROR(from.Synchronize());
  if (a != b) FLASHKV_RETURN_IF_ERROR(to.Synchronize());

  FLASHKV_RETURN_IF_ERROR(Upload(pa, src_rows_, 0));
  FLASHKV_RETURN_IF_ERROR(Grow(&pa.stage, &pa.stage_bytes, count * sizeof(float)));
  if (cudaError_t e = cuda::LaunchMoveRows(src.get(), static_cast<float*>(pa.stage),
                                           static_cast<const int32_t*>(pa.rows[0]), n, row_floats,
                                           false, pa.stream);
      e != cudaSuccess) {
    return CudaError("gathering exchange rows", e);
  }
  FLASHKV_RETURN_IF_ERROR(Upload(pb, dst_rows_, 1));
  if (a != b) {
    FLASHKV_RETURN_IF_ERROR(Grow(&pb.stage, &pb.stage_bytes, count * sizeof(float)));
    if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) return NcclStatus("ncclGroupStart", r);
    const ncclResult_t rs = ncclSend(pa.stage, count, ncclFloat32, b, pa.comm, pa.stream);
    const ncclResult_t rr = ncclRecv(pb.stage, count, ncclFloat32, a, pb.comm, pb.stream);
    const ncclResult_t rg = ncclGroupEnd();
    if (rs != ncclSuccess) return NcclStatus("ncclSend", rs);
    if (rr != ncclSuccess) return NcclStatus("ncclRecv", rr);
    if (rg != ncclSuccess) return NcclStatus("ncclGroupEnd", rg);
  }
  // On one device the gathered rows scatter straight from the source's stage, in its stream.
  const Peer& staged = a == b ? pa : pb;
  if (cudaError_t e = cudaSetDevice(pb.device); e != cudaSuccess) {
    return CudaError("cudaSetDevice", e);
  }
  if (cudaError_t e = cuda::LaunchMoveRows(static_cast<const float*>(staged.stage), dst.get(),
                                           static_cast<const int32_t*>(pb.rows[1]), n, row_floats,
                                           true, pb.stream);
      e != cudaSuccess) {
    return CudaError("scattering exchange rows", e);
  }
  // The destination's later ops run on its own stream: they must find the rows in place.
  if (a != b) {
    cudaSetDevice(pa.device);
    if (cudaError_t e = cudaStreamSynchronize(pa.stream); e != cudaSuccess) {
      return CudaError("sending exchange rows", e);
    }
    cudaSetDevice(pb.device);
  }
  if (cudaError_t e = cudaStreamSynchronize(pb.stream); e != cudaSuccess) {
    return CudaError("receiving exchange rows", e);
  }
  return Status::Ok();
}

}  // namespace flashkv
