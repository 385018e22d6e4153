#include "runtime/runtime.h"

#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#if FLASHKV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace flashkv {

bool Runtime::HasBackend(const std::string& name) {
  if (name == "cpu" || name == "auto") return true;
#if FLASHKV_HAVE_CUDA
  if (name == "cuda") return true;
#endif
  return false;
}

std::string Runtime::ResolveBackend(const std::string& name, std::string* why) {
  if (name != "auto") return name;
#if FLASHKV_HAVE_CUDA
  std::string no_device;
  const int devices = CudaBackend::DeviceCount(&no_device);
  if (devices > 0) {
    if (why != nullptr) *why = fmt::format("{} CUDA device(s) present", devices);
    return "cuda";
  }
  if (why != nullptr) *why = "no CUDA device: " + no_device;
#else
  if (why != nullptr) *why = "this build has no CUDA";
#endif
  return "cpu";
}

int Runtime::CudaDeviceCount(std::string* why) {
#if FLASHKV_HAVE_CUDA
  return CudaBackend::DeviceCount(why);
#else
  if (why != nullptr) *why = "this build has no CUDA";
  return 0;
#endif
}

Expected<std::unique_ptr<Runtime>> Runtime::Open(const RuntimeOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime(options.threads));
  std::string why;
  const std::string backend = ResolveBackend(options.backend, &why);
  if (options.backend == "auto") spdlog::info("backend auto: {} ({})", backend, why);
  if (!options.gpus.empty() && backend != "cuda") {
    return InvalidArgument("--gpus needs the cuda backend, not {}", backend);
  }
  if (options.gpus.size() > 1) {
    return Unsupported(
        "--gpus names {} devices, but one flashkv process drives one GPU so far (expert "
        "parallel over several is designed in docs/MULTI_GPU.md, not built yet); name one",
        options.gpus.size());
  }
  if (backend == "cpu") {
    rt->backend_ = std::make_unique<CpuBackend>(&rt->pool_);
  } else if (backend == "cuda") {
#if FLASHKV_HAVE_CUDA
    CudaBackendOptions cuda;
    if (!options.gpus.empty()) cuda.device = options.gpus[0];
    auto made = CudaBackend::Create(cuda);
    // A device another process holds in exclusive mode fails here ("busy or unavailable").
    if (!made.ok()) return made.status().WithContext(fmt::format("CUDA device {}", cuda.device));
    rt->backend_ = std::move(*made);
#else
    return Unsupported(
        "this flashkv was built without CUDA (configure with -DFLASHKV_CUDA=ON "
        "where nvcc is installed); use --backend cpu");
#endif
  } else {
    return InvalidArgument("unknown backend '{}' (expected auto, cpu or cuda)", options.backend);
  }
  if (IsRandomModelSource(options.model_path)) {
    FLASHKV_ASSIGN_OR_RETURN(RandomModelSpec spec, ParseRandomModelSource(options.model_path));
    RandomModelInfo info{spec};
    RandomWeights counts;
    const auto start = std::chrono::steady_clock::now();
    const std::optional<Backend::MemoryInfo> before = rt->backend_->DeviceMemory();
    auto made = MakeRandomModel(spec, *rt->backend_, options.model, &counts);
    if (!made.ok()) {
      if (made.status().code() == StatusCode::kResourceExhausted && before) {
        return made.status().WithContext(fmt::format(
            "generating the weights of {} on a device with {:.2f} GiB free of {:.2f} GiB "
            "(random:SHAPE:LAYERS builds fewer layers)",
            spec.Describe(), double(before->free_bytes) / double(1ull << 30),
            double(before->total_bytes) / double(1ull << 30)));
      }
      return made.status();
    }
    rt->model_ = std::move(*made);
    info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    info.total_bytes = counts.total_bytes;
    info.bytes_per_token = counts.bytes_per_token;
    rt->random_ = std::move(info);
    return rt;
  }
  const std::optional<Backend::MemoryInfo> before = rt->backend_->DeviceMemory();
  auto model = Model::Load(options.model_path, *rt->backend_, options.model);
  if (!model.ok()) {
    // Out of device memory: say how much the weights are and what the device had.
    if (model.status().code() == StatusCode::kResourceExhausted && before) {
      std::error_code ec;
      const uintmax_t file = std::filesystem::file_size(options.model_path, ec);
      return model.status().WithContext(
          fmt::format("loading {} ({:.2f} GiB) onto a {} device with {:.2f} GiB free of {:.2f} GiB",
                      options.model_path, ec ? 0.0 : double(file) / double(1ull << 30), backend,
                      double(before->free_bytes) / double(1ull << 30),
                      double(before->total_bytes) / double(1ull << 30)));
    }
    return model.status();
  }
  rt->model_ = std::move(*model);
  return rt;
}

}  // namespace flashkv
