#include "engine/runtime.h"

namespace flashkv {

Expected<std::unique_ptr<Runtime>> Runtime::Open(const RuntimeOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime(options.threads));
  auto model = Model::Load(options.model_path, rt->backend_, options.model);
  if (!model.ok()) return model.status();
  rt->model_ = std::move(*model);
  return rt;
}

}  // namespace flashkv
