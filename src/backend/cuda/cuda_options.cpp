// CudaOptionsFromEnvironment: the one place the CUDA backend reads its FLASHKV_CUDA_*
// settings. CudaBackend::Create calls it once; the resolved values live in the backend's state.
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/products/launch.h"

namespace flashkv {
namespace {

// A switch: unset keeps the default (on); set, anything but "0" is on.
int EnvSwitch(const char* name) {
  const char* env = std::getenv(name);
  return env == nullptr || std::strcmp(env, "0") != 0 ? 1 : 0;
}

}  // namespace

Expected<CudaBackendOptions> CudaOptionsFromEnvironment(CudaBackendOptions o) {
  if (o.graphs < 0) o.graphs = EnvSwitch("FLASHKV_CUDA_GRAPHS");
  if (o.pdl < 0) o.pdl = EnvSwitch("FLASHKV_CUDA_PDL");
  if (o.tiled < 0) o.tiled = EnvSwitch("FLASHKV_CUDA_TILED");
  if (o.fused < 0) o.fused = EnvSwitch("FLASHKV_CUDA_FUSED");
  if (o.finish_batch < 0) o.finish_batch = EnvSwitch("FLASHKV_CUDA_FINISH_BATCH");
  if (o.quant_rows < 0) o.quant_rows = EnvSwitch("FLASHKV_CUDA_QUANT_ROWS");
  if (o.imma < 0) {
    const char* env = std::getenv("FLASHKV_CUDA_IMMA");
    o.imma = env != nullptr && *env != '\0' ? std::atoi(env) : 1;
  }
  if (o.imma < 0 || o.imma > cuda::kImmaVariants) {
    return InvalidArgument("FLASHKV_CUDA_IMMA / imma must be 0..{}, not {}", cuda::kImmaVariants,
                           o.imma);
  }
  // The smallest plain batch the tensor cores take (same bits at any size; a speed choice).
  if (o.imma_min_tokens < 0) {
    o.imma_min_tokens = kCudaImmaMinTokens;
    if (const char* env = std::getenv("FLASHKV_CUDA_IMMA_MIN_TOKENS"); env != nullptr && *env) {
      o.imma_min_tokens = std::atoi(env);
      if (o.imma_min_tokens < 1) {
        return InvalidArgument("FLASHKV_CUDA_IMMA_MIN_TOKENS must be >= 1, not {}", env);
      }
    }
  } else if (o.imma_min_tokens < 1) {
    return InvalidArgument("imma_min_tokens must be >= 1, not {}", o.imma_min_tokens);
  }
  if (o.imma_few < 0) {
    o.imma_few = kCudaImmaFew;
    if (const char* env = std::getenv("FLASHKV_CUDA_IMMA_FEW"); env != nullptr && *env) {
      o.imma_few = std::atoi(env);
    }
  }
  if (o.imma_few < 0 || o.imma_few > kCudaImmaFewVariants) {
    return InvalidArgument("FLASHKV_CUDA_IMMA_FEW / imma_few must be 0..{}, not {}",
                           kCudaImmaFewVariants, o.imma_few);
  }
  // The three tile settings are for measurements: a value out of range takes the default.
  if (o.tile_bytes < 0) {
    const char* env = std::getenv("FLASHKV_CUDA_TILE_BYTES");
    const long long v = env != nullptr ? std::atoll(env) : 0;
    o.tile_bytes = v >= kCudaTileMinBytes && v <= kCudaTileMaxBytes ? int(v) : kCudaTileBytes;
  } else if (o.tile_bytes < kCudaTileMinBytes || o.tile_bytes > kCudaTileMaxBytes) {
    o.tile_bytes = kCudaTileBytes;
  }
  if (o.tile_blocks_per_sm < 0) {
    const char* env = std::getenv("FLASHKV_CUDA_TILE_BLOCKS_PER_SM");
    const int v = env != nullptr ? std::atoi(env) : -1;
    o.tile_blocks_per_sm = v >= 0 && v <= 16 ? v : kCudaTileBlocksPerSm;
  } else if (o.tile_blocks_per_sm > 16) {
    o.tile_blocks_per_sm = kCudaTileBlocksPerSm;
  }
  if (o.moe_group_max < 0) {
    const char* env = std::getenv("FLASHKV_CUDA_MOE_GROUP_MAX");
    const int v = env != nullptr ? std::atoi(env) : -1;
    o.moe_group_max = v >= 0 ? v : kCudaMoeGroupMaxTokens;
  }
  if (o.moe_narrow < 0) {
    const char* env = std::getenv("FLASHKV_CUDA_MOE_NARROW");
    const int v = env != nullptr ? std::atoi(env) : -1;
    o.moe_narrow = v >= 0 ? v : kCudaMoeNarrowBelow;
  }
  return o;
}

}  // namespace flashkv
