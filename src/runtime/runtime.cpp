#include "runtime/runtime.h"

#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/expert_cache_plan.h"
#include "util/host_memory.h"

#if FLASHKV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#if FLASHKV_HAVE_NCCL
#include "backend/cuda/nccl_exchange.h"
#endif

namespace flashkv {
namespace {

// Where the routed experts of the GGUF at `path` go (model/expert_cache_plan.h): nullopt
// when every weight goes on the device as before. Only for one home backend without expert
// shards; a backend without device memory of its own offloads only when forced (tests).
// `reads_pageable`: Backend::ReadsPageableHost of the home backend.
Expected<std::optional<ExpertCacheOptions>> PlanPlacement(
    const RuntimeOptions& o, const std::optional<Backend::MemoryInfo>& device, bool reads_pageable,
    std::string* explanation) {
  if (!device && !o.force_expert_cache) return std::optional<ExpertCacheOptions>();
  FLASHKV_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(o.model_path));
  auto config = ModelConfig::FromGguf(file);
  if (!config.ok()) return config.status().WithContext(o.model_path);
  const GgufWeightTally tally = TallyGgufWeights(file);
  ExpertCacheInputs in;
  in.resident_bytes = tally.other_bytes;
  in.routed_bytes = tally.routed_bytes;
  in.slot_bytes = ExpertSlotBytes(tally.expert_matrix_bytes[0], tally.expert_matrix_bytes[1],
                                  tally.expert_matrix_bytes[2]);
  in.n_experts_total = int64_t(config->n_layer) * config->n_expert;
  in.force = o.force_expert_cache;
  in.max_slots = o.expert_cache_slots;
  // The staging buffers serve prefill staging and, the first of them, decode gather.
  in.n_layer = o.expert_stage_min_rows > 0 || o.expert_gather_max_rows > 0 ? config->n_layer : 0;
  in.n_expert = config->n_expert;
  if (device) {
    in.budget_bytes = o.gpu_memory_bytes > 0 ? std::min(o.gpu_memory_bytes, device->free_bytes)
                                             : device->free_bytes;
    in.keep_free_bytes = o.keep_free ? o.keep_free(*config, *device) : 0;
  } else {
    in.budget_bytes = in.resident_bytes + in.routed_bytes;  // host memory: the slots it asks for
  }
  FLASHKV_ASSIGN_OR_RETURN(ExpertCachePlan plan, PlanExpertCache(in));
  *explanation = plan.explanation;
  if (!plan.offload) return std::optional<ExpertCacheOptions>();
  ExpertHostInputs host;
  host.mode = o.expert_host;
  host.routed_bytes = tally.routed_bytes;  // the whole span is mapped, cached experts too
  if (Expected<uint64_t> avail = AvailableHostMemory(); avail.ok()) {
    host.available_known = true;
    host.available_bytes = *avail;
  }
  host.on_memory_filesystem = OnMemoryFilesystem(o.model_path);
  host.device_reads_pageable = reads_pageable;
  FLASHKV_ASSIGN_OR_RETURN(ExpertHostChoice choice, ChooseExpertHost(host));
  *explanation += "; experts read from " + choice.explanation;
  ExpertCacheOptions cache;
  cache.pageable_host = choice.pageable;
  cache.keep_free_bytes = in.keep_free_bytes;
  cache.slots = plan.slots;
  cache.stage_experts = plan.stage_experts;
  cache.stage_min_rows = o.expert_stage_min_rows;
  cache.gather_max_rows = o.expert_gather_max_rows;
  return std::optional<ExpertCacheOptions>(cache);
}

}  // namespace

std::optional<Backend::MemoryInfo> Runtime::DeviceMemoryLeft() const {
  std::optional<Backend::MemoryInfo> m = backend_->DeviceMemory();
  if (!m || budget_ == 0) return m;
  const uint64_t used = free_at_open_ > m->free_bytes ? free_at_open_ - m->free_bytes : 0;
  m->free_bytes = std::min(m->free_bytes, budget_ > used ? budget_ - used : 0);
  m->total_bytes = std::min(m->total_bytes, budget_);
  return m;
}

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
  if (options.expert_shards < 0) {
    return InvalidArgument("--expert-shards must be >= 1, got {}", options.expert_shards);
  }
  if (options.expert_shards > 1 && backend != "cpu") {
    return InvalidArgument(
        "--expert-shards is the CPU form of several --gpus; with the {} backend name the "
        "devices with --gpus",
        backend);
  }
  const std::vector<int> devices = options.gpus.empty() ? std::vector<int>{0} : options.gpus;
  if (backend == "cpu") {
    rt->backend_ = std::make_unique<CpuBackend>(&rt->pool_);
    // The shards take turns within a step, so they share the one pool.
    for (int d = 1; d < options.expert_shards; ++d) {
      rt->more_backends_.push_back(std::make_unique<CpuBackend>(&rt->pool_));
    }
  } else if (backend == "cuda") {
#if FLASHKV_HAVE_CUDA
    for (int device : devices) {
      CudaBackendOptions cuda;
      cuda.device = device;
      auto made = CudaBackend::Create(cuda);
      // A device another process holds in exclusive mode fails here ("busy or unavailable").
      if (!made.ok()) return made.status().WithContext(fmt::format("CUDA device {}", device));
      if (rt->backend_ == nullptr) {
        rt->backend_ = std::move(*made);
      } else {
        rt->more_backends_.push_back(std::move(*made));
      }
    }
#else
    return Unsupported(
        "this flashkv was built without CUDA (configure with -DFLASHKV_CUDA=ON "
        "where nvcc is installed); use --backend cpu");
#endif
  } else {
    return InvalidArgument("unknown backend '{}' (expected auto, cpu or cuda)", options.backend);
  }
  // Expert parallel: home is shard 0. Rows move over NCCL between GPUs where this build links
  // it (FLASHKV_RUNTIME_NCCL, src/runtime/CMakeLists.txt), else through host memory (every
  // backend has Read/Write: slower, the same bits).
  std::vector<Backend*> shards;
  if (!rt->more_backends_.empty()) {
    shards.push_back(rt->backend_.get());
    for (auto& be : rt->more_backends_) shards.push_back(be.get());
#if FLASHKV_HAVE_NCCL
    if (backend == "cuda") {
      auto nccl = NcclRowExchange::Create(shards, devices);
      if (!nccl.ok()) return nccl.status().WithContext("NCCL between the --gpus devices");
      rt->exchange_ = std::move(*nccl);
    }
#endif
    if (rt->exchange_ == nullptr) rt->exchange_ = std::make_unique<HostRowExchange>();
  }
  {
    const std::optional<Backend::MemoryInfo> dev = rt->backend_->DeviceMemory();
    if (dev) {
      rt->free_at_open_ = dev->free_bytes;
      if (options.gpu_memory_bytes > 0 && options.gpu_memory_bytes < dev->free_bytes) {
        rt->budget_ = options.gpu_memory_bytes;
      }
    }
  }
  if (IsRandomModelSource(options.model_path)) {
    if (options.force_expert_cache) {
      return Unsupported(
          "{}: random models generate their weights on the device; the expert cache reads "
          "them from a GGUF file (make-tiny --preset flash writes one)",
          options.model_path);
    }
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
    // Random weights are generated on home, so each shard's block is copied from there.
    if (!shards.empty()) FLASHKV_RETURN_IF_ERROR(rt->model_->ShardExperts(shards, *rt->exchange_));
    info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    info.total_bytes = counts.total_bytes;
    info.bytes_per_token = counts.bytes_per_token;
    rt->random_ = std::move(info);
    return rt;
  }
  const std::optional<Backend::MemoryInfo> before = rt->backend_->DeviceMemory();
  std::optional<ExpertCacheOptions> cache;
  if (shards.empty()) {
    auto planned =
        PlanPlacement(options, before, rt->backend_->ReadsPageableHost(), &rt->placement_);
    if (!planned.ok()) return planned.status().WithContext(options.model_path);
    cache = *planned;
    if (cache) {
      // The slots are sized again once the resident weights are placed (expert_cache.h).
      cache->device_bytes_left = [r = rt.get()]() -> std::optional<uint64_t> {
        const std::optional<Backend::MemoryInfo> m = r->DeviceMemoryLeft();
        if (!m) return std::nullopt;
        return m->free_bytes;
      };
    }
    if (!rt->placement_.empty()) spdlog::info("weights: {}", rt->placement_);
  }
  auto model = !shards.empty() ? Model::LoadExpertParallel(options.model_path, *rt->backend_,
                                                           shards, *rt->exchange_, options.model)
               : cache ? Model::LoadWithExpertCache(options.model_path, *rt->backend_, *cache,
                                                    options.model, options.load_progress)
                       : Model::Load(options.model_path, *rt->backend_, options.model,
                                     options.load_progress);
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
  if (!shards.empty()) {
    const Model::WeightBytes bytes = rt->model_->PlacedBytes();
    std::string per_shard;
    for (uint64_t b : bytes.shards) {
      per_shard += fmt::format("{}{:.1f}", per_shard.empty() ? "" : ", ", double(b) / (1 << 20));
    }
    spdlog::info(
        "expert parallel over {} {} backends: home holds {:.1f} MiB of weights besides "
        "its experts; routed experts per shard (home first): {} MiB",
        shards.size(), backend, double(bytes.home) / double(1 << 20), per_shard);
  }
  return rt;
}

}  // namespace flashkv
