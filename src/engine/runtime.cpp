#include "engine/runtime.h"

#if FLASHKV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace flashkv {

bool Runtime::HasBackend(const std::string& name) {
  if (name == "cpu") return true;
#if FLASHKV_HAVE_CUDA
  if (name == "cuda") return true;
#endif
  return false;
}

Expected<std::unique_ptr<Runtime>> Runtime::Open(const RuntimeOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime(options.threads));
  if (options.backend == "cpu") {
    rt->backend_ = std::make_unique<CpuBackend>(&rt->pool_);
  } else if (options.backend == "cuda") {
#if FLASHKV_HAVE_CUDA
    FLASHKV_ASSIGN_OR_RETURN(rt->backend_, CudaBackend::Create());
#else
    return Unsupported(
        "this flashkv was built without CUDA (configure with -DFLASHKV_CUDA=ON "
        "where nvcc is installed); use --backend cpu");
#endif
  } else {
    return InvalidArgument("unknown backend '{}' (expected cpu or cuda)", options.backend);
  }
  auto model = Model::Load(options.model_path, *rt->backend_, options.model);
  if (!model.ok()) return model.status();
  rt->model_ = std::move(*model);
  return rt;
}

}  // namespace flashkv
