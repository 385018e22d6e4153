// The per-token path allocates nothing once a context has run: this binary counts every
// operator new and decodes a few tokens after a warm-up.
#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model_test_util.h"

namespace {
std::atomic<long> g_news{0};
}  // namespace

// The replacements pair malloc with free; GCC cannot see that through operator new.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}

namespace flashkv {
namespace {

TEST(ModelAllocTest, DecodeStepsDoNotAllocate) {
  for (ModelOptions opts : {ModelOptions{NumericsMode::kOfficial, ActQuantMode::kQ8},
                            ModelOptions{NumericsMode::kHf, ActQuantMode::kOff}}) {
    ThreadPool pool(2);
    CpuBackend be(&pool);
    // The small-window model: 30 tokens already wrap the window and make the indexer choose.
    auto model = Model::Load(testing::SmallWindowDs4TinyPath(), be, &opts);
    ASSERT_TRUE(model.ok());
    auto state = (*model)->NewState(48);
    ASSERT_TRUE(state.ok());
    std::vector<int32_t> prompt(30);
    for (int i = 0; i < 30; ++i) prompt[i] = (i * 7 + 3) % 1000;
    std::vector<float> logits((*model)->config().n_vocab);
    ASSERT_TRUE((*model)->Forward(prompt, *state, LogitsFor::kLast, logits.data()).ok());
    int32_t next = 11;
    ASSERT_TRUE((*model)->Forward({&next, 1}, *state, LogitsFor::kLast, logits.data()).ok());

    const long before = g_news.load();
    for (int step = 0; step < 8; ++step) {
      next = (next * 13 + 5) % 1000;
      const Status s = (*model)->Forward({&next, 1}, *state, LogitsFor::kLast, logits.data());
      ASSERT_TRUE(s.ok());
    }
    EXPECT_EQ(g_news.load() - before, 0);
  }
}

// The same for a multi-session step: three sessions at different positions decoding together.
TEST(ModelAllocTest, BatchedDecodeStepsDoNotAllocate) {
  const ModelOptions opts{NumericsMode::kOfficial, ActQuantMode::kQ8};
  ThreadPool pool(2);
  CpuBackend be(&pool);
  auto model = Model::Load(testing::SmallWindowDs4TinyPath(), be, &opts);
  ASSERT_TRUE(model.ok());
  Model& m = **model;
  std::vector<KvState> states;
  std::vector<int32_t> next = {11, 12, 13};
  std::vector<float> logits(3 * size_t(m.config().n_vocab));
  std::vector<SessionChunk> step;
  for (int s = 0; s < 3; ++s) {
    auto st = m.NewState(48);
    ASSERT_TRUE(st.ok());
    states.push_back(std::move(*st));
  }
  for (int s = 0; s < 3; ++s) {
    std::vector<int32_t> prompt(size_t(10 + 9 * s));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7 + 3 + s) % 1000);
    ASSERT_TRUE(m.Forward(prompt, states[size_t(s)], LogitsFor::kNone, nullptr).ok());
    step.push_back(SessionChunk{{&next[size_t(s)], 1},
                                &states[size_t(s)],
                                LogitsFor::kLast,
                                logits.data() + size_t(s) * m.config().n_vocab});
  }
  ASSERT_TRUE(m.ForwardBatch(step).ok());

  const long before = g_news.load();
  for (int i = 0; i < 8; ++i) {
    for (int32_t& t : next) t = (t * 13 + 5) % 1000;
    ASSERT_TRUE(m.ForwardBatch(step).ok());
  }
  EXPECT_EQ(g_news.load() - before, 0);
}

}  // namespace
}  // namespace flashkv
