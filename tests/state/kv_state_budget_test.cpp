// A KV state is sized before it is allocated: one the machine cannot hold is refused with
// its numbers (it would otherwise be allocated lazily and grow until the machine swaps).
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "state/kv_state.h"

namespace flashkv {
namespace {

TEST(KvStateBudgetTest, AStateBeyondMemoryIsRefusedWithItsSize) {
  ThreadPool pool(1);
  CpuBackend be(&pool);
  KvShape shape;
  shape.head_dim = 512;
  shape.n_swa = 65536;
  shape.indexer_dim = 128;
  shape.ctx_size = 1 << 30;
  for (int l = 0; l < 64; ++l)
    shape.layers.push_back({l % 2 == 0 ? 4 : 128, l % 2 == 0, l % 2 == 0});
  auto s = KvState::Create(be, shape);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.status().message().find(
                "a KV state of 1073741824 tokens (64 layers, window 65536 × 512 floats) needs "),
            std::string::npos)
      << s.status().message();
  // The same shape with a small context fits.
  shape.ctx_size = 64;
  shape.n_swa = 16;
  EXPECT_TRUE(KvState::Create(be, shape).ok());
}

}  // namespace
}  // namespace flashkv
