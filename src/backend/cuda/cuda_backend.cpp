// CudaBackend: device setup, memory, host transfers through pinned staging, weight
// placement, and the sticky error. The ops live in ops/, products/, attention/ and fused/.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <span>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "backend/cuda/cuda_launchers.h"
#include "backend/cuda/cuda_state.h"
#include "backend/cuda/fused/launch.h"
#include "backend/cuda/products/launch.h"
#include "tensor/iq2_tables.h"

namespace flashkv {
namespace {

Status CudaStatus(const char* what, cudaError_t e) {
  return Internal("{}: CUDA error {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

// Copies of at least this many bytes to or from page-locked host memory go straight to the
// copy engine; smaller ones are cheaper batched through the staging buffers than asked about
// one by one (IsPinned). A session's logits row (129,280 floats, 517 KB; engine/engine.h
// PinLogits) is above it.
constexpr size_t kDirectCopyMinBytes = size_t(64) << 10;

// Whether the host range is page-locked (cudaHostAlloc'd or registered), so the copy
// engine can read it directly.
bool IsPinned(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // clear the error a plain pointer may leave
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

// cudaSetDevice only when another device is current (the call is per thread).
void MakeCurrent(int device) {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device) cudaSetDevice(device);
}

}  // namespace

void CudaBackend::State::Fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(error_mu);
  if (error.empty()) error = what;
}

void CudaBackend::State::FailCuda(const char* what, cudaError_t e) {
  Fail(fmt::format("{}: CUDA error {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}

void CudaBackend::State::Flush() {
  // Launches are issued only here, and every entry point that calls the CUDA runtime flushes
  // first: making the device current here lets one thread drive several CudaBackends
  // (expert parallel over --gpus, docs/MULTI_GPU.md).
  MakeCurrent(device);
  std::string failed;
  const cudaError_t e = queue->Flush(&failed);
  if (e != cudaSuccess) FailCuda(("launching " + failed).c_str(), e);
}

void* CudaBackend::State::Scratch(CudaScratch slot, size_t bytes) {
  const size_t i = size_t(slot);
  if (scratch_bytes[i] >= bytes && scratch[i] != nullptr) return scratch[i];
  // Regrowing: earlier launches may still use the old buffer.
  Flush();
  cudaStreamSynchronize(stream);
  if (scratch[i] != nullptr) cudaFree(scratch[i]);
  scratch[i] = nullptr;
  scratch_bytes[i] = 0;
  const size_t want = std::max<size_t>(bytes + bytes / 4, 256);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, want);
  if (e != cudaSuccess) {
    FailCuda(fmt::format("allocating {} bytes of scratch", want).c_str(), e);
    return nullptr;
  }
  scratch[i] = p;
  scratch_bytes[i] = want;
  return p;
}

CudaBackend::CudaBackend(std::unique_ptr<State> state) : s_(std::move(state)) {}

CudaBackend::State::AsyncCopy::~AsyncCopy() {
  if (done != nullptr) cudaEventDestroy(done);
}

CudaBackend::~CudaBackend() {
  if (!s_) return;
  s_->Flush();
  cudaStreamSynchronize(s_->stream);
  if (s_->upload_stream != nullptr) {
    cudaStreamSynchronize(s_->upload_stream);
    cudaStreamDestroy(s_->upload_stream);
  }
  for (auto& [ticket, ev] : s_->upload_events) cudaEventDestroy(ev);
  if (s_->copy_stream != nullptr) {
    cudaStreamSynchronize(s_->copy_stream);
    s_->async_copies.clear();
    cudaStreamDestroy(s_->copy_stream);
  }
  s_->queue.reset();
  for (void* p : s_->weight_allocs) cudaFree(p);
  for (void* p : s_->scratch) {
    if (p != nullptr) cudaFree(p);
  }
  if (s_->iq2_grid != nullptr) cudaFree(const_cast<uint64_t*>(s_->iq2_grid));
  if (s_->sync_counters != nullptr) cudaFree(s_->sync_counters);
  for (int i = 0; i < State::kStagingBuffers; ++i) {
    if (s_->staging[i] != nullptr) cudaFreeHost(s_->staging[i]);
    if (s_->staging_done[i] != nullptr) cudaEventDestroy(s_->staging_done[i]);
  }
  cudaStreamDestroy(s_->stream);
}

// Why cudaGetDeviceCount found nothing, in words that point at the cause: the runtime
// reports a machine with no NVIDIA driver at all as "CUDA driver version is insufficient",
// which sends people to update a driver they do not have.
static std::string NoDeviceReason(cudaError_t e) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);  // 0 when no driver (libcuda.so) is installed
  cudaRuntimeGetVersion(&runtime);
  cudaGetLastError();
  if (e == cudaErrorInsufficientDriver && driver == 0) {
    return "no NVIDIA driver found: libcuda.so is not installed or cannot be loaded";
  }
  if (e == cudaErrorInsufficientDriver) {
    return fmt::format(
        "the NVIDIA driver supports CUDA {}.{}, older than this build's CUDA runtime {}.{}",
        driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  }
  if (e == cudaSuccess || e == cudaErrorNoDevice) {
    return fmt::format("the NVIDIA driver (CUDA {}.{}) reports no CUDA device", driver / 1000,
                       driver % 1000 / 10);
  }
  return cudaGetErrorString(e);
}

int CudaBackend::DeviceCount(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    if (why != nullptr) *why = NoDeviceReason(e);
    return 0;
  }
  return count;
}

Expected<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendOptions& options) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return Unsupported("no CUDA device found ({}); use --backend cpu", NoDeviceReason(e));
  }
  if (options.device < 0 || options.device >= count) {
    return InvalidArgument("CUDA device {} does not exist ({} present)", options.device, count);
  }
  auto s = std::make_unique<State>();
  s->device = options.device;
  if ((e = cudaSetDevice(s->device)) != cudaSuccess) return CudaStatus("cudaSetDevice", e);
  if ((e = cudaGetDeviceProperties(&s->prop, s->device)) != cudaSuccess) {
    return CudaStatus("cudaGetDeviceProperties", e);
  }
  if (s->prop.major < 7) {
    return Unsupported("CUDA device {} is compute capability {}.{}; flashkv needs 7.0 or newer",
                       s->prop.name, s->prop.major, s->prop.minor);
  }
  int binary_version = 0;
  int ptx_version = 0;
  if ((e = cuda::KernelImage(&binary_version, &ptx_version)) != cudaSuccess) {
    (void)cudaGetLastError();  // the probe's error is not sticky; clear it all the same
    return Unsupported(
        "CUDA device {} is sm_{}{}, and this build has no kernels for it (built for "
        "FLASHKV_CUDA_ARCHS={}): rebuild with `make cuda-archs` or "
        "-DFLASHKV_CUDA_ARCHS={}{} ({})",
        s->prop.name, s->prop.major, s->prop.minor, FLASHKV_CUDA_ARCHS_STRING, s->prop.major,
        s->prop.minor, cudaGetErrorString(e));
  }
  if ((e = cuda::HopperFeatures(&s->hopper_features)) != cudaSuccess) {
    return CudaStatus("probing the device's kernel code", e);
  }
  if ((e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking)) != cudaSuccess) {
    return CudaStatus("cudaStreamCreate", e);
  }
  for (int i = 0; i < State::kStagingBuffers; ++i) {
    if ((e = cudaHostAlloc(&s->staging[i], State::kStagingBytes, cudaHostAllocDefault)) !=
        cudaSuccess) {
      return CudaStatus("allocating pinned staging", e);
    }
    if ((e = cudaEventCreateWithFlags(&s->staging_done[i], cudaEventDisableTiming)) !=
        cudaSuccess) {
      return CudaStatus("cudaEventCreate", e);
    }
  }
  auto settings = CudaOptionsFromEnvironment(options);
  if (!settings.ok()) return settings.status();
  const bool graphs = settings->graphs != 0;
  // Programmatic dependent launch is Hopper's (sm_90 and later); below it launches plainly
  // (device/pdl.cuh's waits compile to nothing there).
  const bool pdl = settings->pdl != 0 && s->prop.major >= 9;
  s->queue = std::make_unique<cuda::LaunchQueue>(s->stream, graphs, pdl);
  const int imma = settings->imma;
  s->imma = imma;
  s->imma_min_tokens = settings->imma_min_tokens;
  s->imma_few = settings->imma_few;
  s->tiled_prefill = settings->tiled != 0;
  s->fused = settings->fused != 0;
  s->tile_bytes = uint64_t(settings->tile_bytes);
  s->tile_blocks_per_sm = settings->tile_blocks_per_sm;
  s->moe_group_max = settings->moe_group_max;
  s->moe_narrow = settings->moe_narrow;
  s->finish_batch = settings->finish_batch != 0;
  s->quant_rows = settings->quant_rows != 0;
  {
    void* counters = nullptr;
    const size_t bytes = sizeof(unsigned) * cuda::kSyncCounters;
    if ((e = cudaMalloc(&counters, bytes)) != cudaSuccess ||
        (e = cudaMemset(counters, 0, bytes)) != cudaSuccess) {
      return CudaStatus("allocating the fused kernels' counters", e);
    }
    s->sync_counters = static_cast<unsigned*>(counters);
  }
  {
    void* grid = nullptr;
    if ((e = cudaMalloc(&grid, sizeof(kIq2xxsGrid))) != cudaSuccess ||
        (e = cudaMemcpy(grid, kIq2xxsGrid, sizeof(kIq2xxsGrid), cudaMemcpyHostToDevice)) !=
            cudaSuccess) {
      return CudaStatus("uploading the IQ2_XXS grid", e);
    }
    s->iq2_grid = static_cast<const uint64_t*>(grid);
  }
  std::unique_ptr<CudaBackend> be(new CudaBackend(std::move(s)));
  spdlog::info(
      "cuda backend: {} (kernels: sm_{} code from compute_{} of FLASHKV_CUDA_ARCHS={}, Hopper "
      "sm_90a instructions {}; graphs {}, int8 tensor-core prefill {}, tiled prefill {}, fused "
      "{}, overlapped launches {})",
      be->DeviceDescription(), binary_version, ptx_version, FLASHKV_CUDA_ARCHS_STRING,
      be->s_->hopper_features ? "on" : "off", graphs ? "on" : "off",
      imma == 0 ? std::string("off") : fmt::format("tiles {}", imma),
      be->s_->tiled_prefill ? "on" : "off", be->s_->fused ? "on" : "off", pdl ? "on" : "off");
  return be;
}

bool CudaBackend::hopper_features() const {
  return s_->hopper_features;
}
std::string_view CudaBackend::BuildArchitectures() {
  return FLASHKV_CUDA_ARCHS_STRING;
}

std::string CudaBackend::DeviceDescription() const {
  return fmt::format("{}, {} SMs, {:.1f} GiB, sm_{}{}", s_->prop.name, s_->prop.multiProcessorCount,
                     double(s_->prop.totalGlobalMem) / double(1ull << 30), s_->prop.major,
                     s_->prop.minor);
}

uint64_t CudaBackend::graph_launches() const {
  return s_->queue->graph_launches();
}
uint64_t CudaBackend::direct_launches() const {
  return s_->queue->direct_launches();
}
void CudaBackend::SetProfiling(bool on) {
  s_->Flush();
  s_->queue->SetProfiling(on);
}
std::string CudaBackend::ProfileReport(bool reset) {
  s_->Flush();
  return s_->queue->ProfileReport(reset);
}
std::vector<CudaKernelTime> CudaBackend::ProfileTimes(bool reset) {
  s_->Flush();
  std::vector<CudaKernelTime> out;
  for (const cuda::KernelTiming& t : s_->queue->Timings(reset)) {
    out.push_back(CudaKernelTime{t.name, t.launches, t.ms, t.bytes});
  }
  return out;
}
bool CudaBackend::SetImma(int variant, int min_tokens) {
  if (variant < 0 || variant > cuda::kImmaVariants) return false;
  s_->Flush();
  s_->imma = variant;
  s_->imma_min_tokens = std::max(1, min_tokens);
  return true;
}
bool CudaBackend::SetImmaFew(int few) {
  if (few < 0 || few > kCudaImmaFewVariants) return false;
  s_->Flush();
  s_->imma_few = few;
  return true;
}
bool CudaBackend::SetMoeKernels(int group_max, int narrow, bool grid_copies) {
  if (group_max < 0 || narrow < 0) return false;
  s_->Flush();
  s_->moe_group_max = group_max;
  s_->moe_narrow = narrow;
  s_->moe_grid_copies = grid_copies;
  return true;
}
void CudaBackend::SetFinishBatch(bool on) {
  s_->Flush();
  s_->finish_batch = on;
}
void CudaBackend::SetQuantRows(bool on) {
  s_->Flush();
  s_->quant_rows = on;
}
int CudaBackend::imma() const {
  return s_->imma;
}
Status CudaBackend::SetFloatPath(FloatPath path) {
  SetFastTerms(path == FloatPath::kFast ? kCudaFastTerms : 0);
  return Status::Ok();
}
bool CudaBackend::SetFastTerms(int terms) {
  if (terms < 0 || terms > 2) return false;
  s_->Flush();
  s_->fast_terms = terms;
  return true;
}
int CudaBackend::fast_terms() const {
  return s_->fast_terms;
}
void CudaBackend::SetFastIndexer(bool on) {
  s_->Flush();
  s_->fast_indexer = on;
}
void CudaBackend::SetTiledPrefill(bool on) {
  s_->Flush();
  s_->tiled_prefill = on;
}
bool CudaBackend::tiled_prefill() const {
  return s_->tiled_prefill;
}
void CudaBackend::SetTiledIndexer(bool on) {
  s_->Flush();
  s_->tiled_indexer = on;
}
void CudaBackend::SetFused(bool on) {
  s_->Flush();
  s_->fused = on;
}
bool CudaBackend::fused() const {
  return s_->fused;
}
void CudaBackend::SetOverlappedLaunches(bool on) {
  s_->Flush();
  s_->queue->SetOverlap(on);
}
bool CudaBackend::overlapped_launches() const {
  return s_->queue->overlap();
}

Expected<double> CudaBackend::TimeDeviceCopy(size_t bytes, int reps) {
  if (bytes == 0 || reps <= 0) return InvalidArgument("device copy: {} bytes x {}", bytes, reps);
  FLASHKV_RETURN_IF_ERROR(Synchronize());
  void* src = nullptr;
  void* dst = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t e = cudaMalloc(&src, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&dst, bytes);
  if (e == cudaSuccess) e = cudaMemsetAsync(src, 1, bytes, s_->stream);
  if (e == cudaSuccess) e = cudaEventCreate(&start);
  if (e == cudaSuccess) e = cudaEventCreate(&stop);
  // One untimed copy, then `reps` between two events.
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s_->stream);
  if (e == cudaSuccess) e = cudaEventRecord(start, s_->stream);
  for (int i = 0; i < reps && e == cudaSuccess; ++i) {
    e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s_->stream);
  }
  if (e == cudaSuccess) e = cudaEventRecord(stop, s_->stream);
  if (e == cudaSuccess) e = cudaEventSynchronize(stop);
  float ms = 0;
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
  const cudaError_t failed = e;
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  if (src != nullptr) cudaFree(src);
  if (dst != nullptr) cudaFree(dst);
  if (failed != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus("timing a device copy", failed);
  }
  return double(ms) / reps;
}

Expected<DeviceBuffer> CudaBackend::Alloc(size_t bytes) {
  s_->Flush();
  void* p = nullptr;
  const size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  cudaError_t e = cudaMalloc(&p, rounded);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhausted("cannot allocate {} bytes of GPU memory: {}", bytes,
                             cudaGetErrorString(e));
  }
  if ((e = cudaMemsetAsync(p, 0, rounded, s_->stream)) != cudaSuccess) {
    cudaFree(p);
    return CudaStatus("clearing a new buffer", e);
  }
  return DeviceBuffer(this, p, bytes);
}

void CudaBackend::FreeBuffer(void* data) {
  s_->Flush();
  cudaStreamSynchronize(s_->stream);
  cudaFree(data);
}

Status CudaBackend::Synchronize() {
  s_->Flush();
  const cudaError_t e = cudaStreamSynchronize(s_->stream);
  if (e != cudaSuccess) s_->FailCuda("synchronize", e);
  std::lock_guard<std::mutex> lock(s_->error_mu);
  if (!s_->error.empty()) return Internal("cuda backend: {}", s_->error);
  return Status::Ok();
}

Expected<uint64_t> CudaBackend::ReadManyAsync(const HostCopy* copies, size_t n) {
  State& s = *s_;
  bool all_pinned = true;
  for (size_t i = 0; i < n && all_pinned; ++i) {
    all_pinned = copies[i].bytes == 0 || IsPinned(copies[i].host);
  }
  auto ticket = [&s](std::shared_ptr<State::AsyncCopy> copy) {
    std::lock_guard<std::mutex> lock(s.async_mu);
    const uint64_t t = ++s.next_ticket;
    if (copy) s.async_copies.emplace(t, std::move(copy));
    return t;
  };
  // The copy engine cannot read into pageable memory without the host's help.
  if (!all_pinned) {
    FLASHKV_RETURN_IF_ERROR(ReadMany(copies, n));
    return ticket(nullptr);
  }
  s.Flush();
  cudaEvent_t ready = nullptr;
  auto copy = std::make_shared<State::AsyncCopy>();
  cudaError_t e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(ready, s.stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(s.copy_stream, ready, 0);
  if (ready != nullptr) cudaEventDestroy(ready);  // the wait holds what it needs
  for (size_t i = 0; i < n && e == cudaSuccess; ++i) {
    if (copies[i].bytes == 0) continue;
    e = cudaMemcpyAsync(copies[i].host, copies[i].device.get(), copies[i].bytes,
                        cudaMemcpyDeviceToHost, s.copy_stream);
  }
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&copy->done, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(copy->done, s.copy_stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    cudaStreamSynchronize(s.copy_stream);  // nothing may still write into the host ranges
    return CudaStatus("asynchronous device to host copy", e);
  }
  return ticket(std::move(copy));
}

Status CudaBackend::WaitCopies(uint64_t t) {
  State& s = *s_;
  std::shared_ptr<State::AsyncCopy> copy;
  {
    std::lock_guard<std::mutex> lock(s.async_mu);
    auto it = s.async_copies.find(t);
    if (it == s.async_copies.end()) return Status::Ok();  // done, or waited for already
    copy = it->second;
  }
  const cudaError_t e = cudaEventSynchronize(copy->done);
  {
    std::lock_guard<std::mutex> lock(s.async_mu);
    s.async_copies.erase(t);
  }
  if (e != cudaSuccess) return CudaStatus("asynchronous device to host copy", e);
  return Status::Ok();
}

Status CudaBackend::PinHost(void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return Status::Ok();
  const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(fmt::format("page-locking {} bytes of host memory", bytes).c_str(), e);
  }
  return Status::Ok();
}

void CudaBackend::UnpinHost(void* p) {
  if (p == nullptr) return;
  // Copies out of or into the range may still be queued.
  s_->Flush();
  cudaStreamSynchronize(s_->stream);
  cudaStreamSynchronize(s_->copy_stream);
  if (cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
}

Expected<DevPtr<const uint8_t>> CudaBackend::MapHost(const void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return InvalidArgument("mapping an empty host range");
  MakeCurrent(s_->device);
  unsigned flags = cudaHostRegisterMapped | cudaHostRegisterPortable;
  int read_only = 0;
  if (cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, s_->device) ==
          cudaSuccess &&
      read_only != 0) {
    flags |= cudaHostRegisterReadOnly;
  }
  void* host = const_cast<void*>(p);
  cudaError_t e = cudaHostRegister(host, bytes, flags);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(
        fmt::format("mapping {:.2f} GiB of host memory for the device (page-locked{})",
                    double(bytes) / double(1ull << 30), read_only ? ", read-only" : "")
            .c_str(),
        e);
  }
  void* dev = nullptr;
  e = cudaHostGetDevicePointer(&dev, host, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();
    cudaHostUnregister(host);
    return CudaStatus("the device address of mapped host memory", e);
  }
  return DevPtr<const uint8_t>(static_cast<const uint8_t*>(dev));
}

void CudaBackend::UnmapHost(const void* p) {
  UnpinHost(const_cast<void*>(p));
}

bool CudaBackend::ReadsPageableHost() const {
  // cudaDevAttrPageableMemoryAccess: the driver resolves the device's loads of any host
  // address through the host's page tables (HMM with the open kernel modules, or ATS).
  return s_->prop.pageableMemoryAccess != 0;
}

namespace {

// The event of `ticket`, taken out of the table (each ticket is used once).
cudaEvent_t TakeUploadEvent(CudaBackend::State& s, uint64_t ticket) {
  std::lock_guard<std::mutex> lock(s.async_mu);
  auto it = s.upload_events.find(ticket);
  if (it == s.upload_events.end()) return nullptr;
  cudaEvent_t e = it->second;
  s.upload_events.erase(it);
  return e;
}

// Records an event on `stream` under a new ticket.
Expected<uint64_t> RecordUploadEvent(CudaBackend::State& s, cudaStream_t stream) {
  cudaEvent_t ev = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(ev, stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (ev != nullptr) cudaEventDestroy(ev);
    return CudaStatus("recording an upload event", e);
  }
  std::lock_guard<std::mutex> lock(s.async_mu);
  const uint64_t t = ++s.next_ticket;
  s.upload_events.emplace(t, ev);
  return t;
}

}  // namespace

Expected<uint64_t> CudaBackend::MarkOps() {
  s_->Flush();
  return RecordUploadEvent(*s_, s_->stream);
}

Expected<uint64_t> CudaBackend::UploadAfter(uint64_t after, const HostCopy* copies, size_t n) {
  State& s = *s_;
  MakeCurrent(s.device);
  cudaError_t e = cudaSuccess;
  if (s.upload_stream == nullptr) {
    e = cudaStreamCreateWithFlags(&s.upload_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      cudaGetLastError();
      s.upload_stream = nullptr;
      return CudaStatus("creating the upload stream", e);
    }
  }
  if (after != 0) {
    cudaEvent_t ev = TakeUploadEvent(s, after);
    if (ev == nullptr) return Internal("cuda backend: no op mark {}", after);
    e = cudaStreamWaitEvent(s.upload_stream, ev, 0);
    cudaEventDestroy(ev);  // the wait holds what it needs
  }
  for (size_t i = 0; i < n && e == cudaSuccess; ++i) {
    if (copies[i].bytes == 0) continue;
    e = cudaMemcpyAsync(copies[i].device.get(), copies[i].host, copies[i].bytes,
                        cudaMemcpyHostToDevice, s.upload_stream);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus("host to device upload", e);
  }
  return RecordUploadEvent(s, s.upload_stream);
}

Status CudaBackend::WaitUpload(uint64_t ticket) {
  State& s = *s_;
  s.Flush();
  cudaEvent_t ev = TakeUploadEvent(s, ticket);
  if (ev == nullptr) return Internal("cuda backend: no upload {}", ticket);
  const cudaError_t e = cudaStreamWaitEvent(s.stream, ev, 0);
  cudaEventDestroy(ev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus("waiting for an upload", e);
  }
  return Status::Ok();
}

std::optional<Backend::MemoryInfo> CudaBackend::DeviceMemory() const {
  size_t free_bytes = 0, total_bytes = 0;
  MakeCurrent(s_->device);  // the figures are the current device's
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return MemoryInfo{uint64_t(free_bytes), uint64_t(total_bytes)};
}

Status CudaBackend::Write(DevPtr<void> dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  const HostCopy c{dst, const_cast<void*>(src), bytes};
  return WriteMany(&c, 1);
}

Status CudaBackend::Read(DevPtr<const void> src, void* dst, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  const HostCopy c{DevPtr<void>(const_cast<void*>(src.get())), dst, bytes};
  return ReadMany(&c, 1);
}

// The host side of both directions walks the copies as one byte stream cut into
// staging-sized pieces; pinned host ranges bypass staging.
namespace {

struct Piece {
  uint8_t* dev;
  uint8_t* host;
  size_t bytes;
  size_t staging_off;
};

}  // namespace

Status CudaBackend::ReadMany(const HostCopy* copies, size_t n_copies) {
  State& s = *s_;
  s.Flush();
  cudaError_t e = cudaSuccess;
  // Pinned destinations: straight copies, all queued before one wait.
  bool any_pinned = false;
  std::vector<const HostCopy*> staged;
  for (const HostCopy& c : std::span<const HostCopy>(copies, n_copies)) {
    if (c.bytes == 0) continue;
    if (c.bytes >= kDirectCopyMinBytes && IsPinned(c.host)) {
      e = cudaMemcpyAsync(c.host, c.device.get(), c.bytes, cudaMemcpyDeviceToHost, s.stream);
      if (e != cudaSuccess) return CudaStatus("device to host copy", e);
      any_pinned = true;
    } else {
      staged.push_back(&c);
    }
  }
  // Staged: fill buffer b with pieces of the stream, record an event, drain it on the host
  // while the other buffer fills.
  std::array<std::vector<Piece>, State::kStagingBuffers> filled;
  size_t ci = 0, coff = 0;  // position in `staged`
  auto fill = [&](int b) -> bool {
    filled[b].clear();
    size_t used = 0;
    while (ci < staged.size() && used < State::kStagingBytes) {
      const HostCopy& c = *staged[ci];
      const size_t n = std::min(c.bytes - coff, State::kStagingBytes - used);
      Piece p{static_cast<uint8_t*>(c.device.get()) + coff, static_cast<uint8_t*>(c.host) + coff, n,
              used};
      e = cudaMemcpyAsync(static_cast<uint8_t*>(s.staging[b]) + used, p.dev, n,
                          cudaMemcpyDeviceToHost, s.stream);
      if (e != cudaSuccess) return false;
      filled[b].push_back(p);
      used += n;
      coff += n;
      if (coff == c.bytes) {
        ++ci;
        coff = 0;
      }
    }
    if (filled[b].empty()) return true;
    e = cudaEventRecord(s.staging_done[b], s.stream);
    return e == cudaSuccess;
  };
  if (!fill(0) || !fill(1)) return CudaStatus("device to host copy", e);
  for (int b = 0; !filled[b].empty(); b ^= 1) {
    if ((e = cudaEventSynchronize(s.staging_done[b])) != cudaSuccess) {
      s.FailCuda("device to host copy", e);
      break;
    }
    for (const Piece& p : filled[b]) {
      std::memcpy(p.host, static_cast<uint8_t*>(s.staging[b]) + p.staging_off, p.bytes);
    }
    if (!fill(b)) return CudaStatus("device to host copy", e);
  }
  if (any_pinned || staged.empty()) {
    if ((e = cudaStreamSynchronize(s.stream)) != cudaSuccess) s.FailCuda("device to host copy", e);
  }
  std::lock_guard<std::mutex> lock(s.error_mu);
  if (!s.error.empty()) return Internal("cuda backend: {}", s.error);
  return Status::Ok();
}

Status CudaBackend::WriteMany(const HostCopy* copies, size_t n_copies) {
  State& s = *s_;
  s.Flush();
  cudaError_t e = cudaSuccess;
  std::array<bool, State::kStagingBuffers> busy{};
  int b = 0;
  size_t used = 0;
  auto submit = [&]() -> bool {
    busy[b] = true;
    e = cudaEventRecord(s.staging_done[b], s.stream);
    b ^= 1;
    used = 0;
    if (busy[b]) {
      e = cudaEventSynchronize(s.staging_done[b]);
      busy[b] = false;
    }
    return e == cudaSuccess;
  };
  for (const HostCopy& c : std::span<const HostCopy>(copies, n_copies)) {
    if (c.bytes == 0) continue;
    if (c.bytes >= kDirectCopyMinBytes && IsPinned(c.host)) {
      e = cudaMemcpyAsync(c.device.get(), c.host, c.bytes, cudaMemcpyHostToDevice, s.stream);
      if (e != cudaSuccess) return CudaStatus("host to device copy", e);
      continue;
    }
    size_t off = 0;
    while (off < c.bytes) {
      const size_t n = std::min(c.bytes - off, State::kStagingBytes - used);
      uint8_t* stage = static_cast<uint8_t*>(s.staging[b]) + used;
      std::memcpy(stage, static_cast<const uint8_t*>(c.host) + off, n);
      e = cudaMemcpyAsync(static_cast<uint8_t*>(c.device.get()) + off, stage, n,
                          cudaMemcpyHostToDevice, s.stream);
      if (e != cudaSuccess) return CudaStatus("host to device copy", e);
      used += n;
      off += n;
      if (used == State::kStagingBytes && !submit()) return CudaStatus("host to device copy", e);
    }
  }
  // The staging buffers are reused by the next call: wait for the copies out of them.
  if ((e = cudaStreamSynchronize(s.stream)) != cudaSuccess) s.FailCuda("host to device copy", e);
  std::lock_guard<std::mutex> lock(s.error_mu);
  if (!s.error.empty()) return Internal("cuda backend: {}", s.error);
  return Status::Ok();
}

Expected<Weight> CudaBackend::PlaceWeight(const WeightSource& src) {
  // Refused before anything is uploaded: a type without kernels here. MXFP4, the K-quants
  // beyond ds4's and the IQ types beyond IQ2_XXS run with q8 activations only
  // (products/mxfp4_launch.h, products/kquant_launch.h).
  switch (src.type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ2_K:
    case DType::kQ4_K:
    case DType::kIQ2_XXS:
    case DType::kMXFP4:
    case DType::kQ3_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ2_XS:
    case DType::kIQ1_M:
    case DType::kIQ3_XXS:
    case DType::kIQ3_S:
    case DType::kIQ2_S:
    case DType::kIQ1_S:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kI32:
      break;
    default:
      return Unsupported(
          "tensor {} has type {}, which the CUDA backend has no kernels for yet "
          "(the CPU backend runs it)",
          src.name, GetDTypeInfo(src.type).name);
  }
  FLASHKV_ASSIGN_OR_RETURN(uint64_t row_bytes, RowBytes(src.type, src.ne[0]));
  const uint64_t need = row_bytes * src.ne[1] * src.ne[2];
  if (need > src.nbytes) {
    return Corrupt("{} bytes needed for shape [{}, {}, {}], tensor holds {}", need, src.ne[0],
                   src.ne[1], src.ne[2], src.nbytes);
  }
  s_->Flush();
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<uint64_t>(need, 256));
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhausted("cannot allocate {} bytes of GPU memory for {}: {}", need, src.name,
                             cudaGetErrorString(e));
  }
  s_->weight_allocs.push_back(p);
  Status st = Write(DevPtr<void>(p), src.host_data, need);
  if (!st.ok()) return st.WithContext(src.name);
  Weight w;
  w.name = src.name;
  w.type = src.type;
  w.ne = src.ne;
  w.row_bytes = row_bytes;
  w.data = DevPtr<const uint8_t>(static_cast<const uint8_t*>(p));
  return w;
}

Expected<Weight> CudaBackend::RandomWeight(const std::string& name, DType type,
                                           std::array<uint64_t, 3> ne, uint64_t fill_seed,
                                           float scale) {
  FLASHKV_RETURN_IF_ERROR(CheckRandomWeight(name, type, ne));
  FLASHKV_ASSIGN_OR_RETURN(uint64_t row_bytes, RowBytes(type, ne[0]));
  const uint64_t rows = ne[1] * ne[2];
  const uint64_t need = row_bytes * rows;
  s_->Flush();
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<uint64_t>(need, 256));
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhausted("cannot allocate {} bytes of GPU memory for {}: {}", need, name,
                             cudaGetErrorString(e));
  }
  s_->weight_allocs.push_back(p);
  cuda::LaunchRandomFill(*s_, static_cast<uint8_t*>(p), type, ne[0], rows, row_bytes, fill_seed,
                         scale);
  Weight w;
  w.name = name;
  w.type = type;
  w.ne = ne;
  w.row_bytes = row_bytes;
  w.data = DevPtr<const uint8_t>(static_cast<const uint8_t*>(p));
  return w;
}

}  // namespace flashkv
