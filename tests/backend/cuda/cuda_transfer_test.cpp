// Host transfers of the CUDA backend that the cache tiers rely on: page-locking host
// memory (PinHost), asynchronous device → host copies on the copy stream (ReadManyAsync:
// they see the ops queued before them, the caller does not wait, any thread may wait for
// the ticket, pageable memory falls back to a synchronous copy), a snapshot captured
// asynchronously while the ring is rewritten, and the device's memory figures. Label `gpu`.
#include <cstdlib>
#include <thread>
#include <vector>

#include "../../kv/kv_test_util.h"
#include "cuda_test_util.h"
#include "snapshot/snapshot_codec.h"

namespace flashkv::testing {
namespace {

struct PinnedFloats {
  explicit PinnedFloats(Backend& be, size_t n) : be_(be), n_(n) {
    p_ = static_cast<float*>(std::aligned_alloc(4096, (n * sizeof(float) + 4095) / 4096 * 4096));
    ok_ = be_.PinHost(p_, n * sizeof(float)).ok();
  }
  ~PinnedFloats() {
    if (ok_) be_.UnpinHost(p_);
    std::free(p_);
  }
  float* data() { return p_; }
  bool ok() const { return ok_; }

 private:
  Backend& be_;
  size_t n_;
  float* p_ = nullptr;
  bool ok_ = false;
};

TEST(CudaTransfer, AsyncCopySeesEarlierOpsAndAnyThreadMayWait) {
  FLASHKV_REQUIRE_GPU();
  CudaBackend* gpu = SharedCuda();
  const size_t n = size_t(16) << 20;  // 64 MiB: long enough to still be copying below
  auto a = gpu->Alloc(n * sizeof(float));
  auto b = gpu->Alloc(n * sizeof(float));
  ASSERT_TRUE(a.ok() && b.ok());
  PinnedFloats host(*gpu, n);
  ASSERT_TRUE(host.ok());
  for (int round = 0; round < 3; ++round) {
    const float value = 1.5f + float(round);
    gpu->Fill(a->as<float>(), value, n);  // queued before the copy: must be seen
    HostCopy c{a->as<void>(), host.data(), n * sizeof(float)};
    auto ticket = gpu->ReadManyAsync(&c, 1);
    ASSERT_TRUE(ticket.ok()) << ticket.status().ToString();
    gpu->Fill(b->as<float>(), -7.0f, n);  // later work on other memory runs alongside
    std::thread waiter([&] { EXPECT_TRUE(gpu->WaitCopies(*ticket).ok()); });
    ASSERT_TRUE(gpu->WaitCopies(*ticket).ok());
    waiter.join();
    ASSERT_TRUE(gpu->WaitCopies(*ticket).ok());  // again: returns at once
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += host.data()[i] != value;
    EXPECT_EQ(bad, 0u) << "round " << round;
  }
  ASSERT_TRUE(gpu->Synchronize().ok());

  // Pageable memory: copied before the call returns, still through a ticket.
  std::vector<float> pageable(1 << 20, 0.0f);
  gpu->Fill(a->as<float>(), 3.25f, pageable.size());
  HostCopy c{a->as<void>(), pageable.data(), pageable.size() * sizeof(float)};
  auto ticket = gpu->ReadManyAsync(&c, 1);
  ASSERT_TRUE(ticket.ok());
  ASSERT_TRUE(gpu->WaitCopies(*ticket).ok());
  for (float x : pageable) ASSERT_EQ(x, 3.25f);
}

TEST(CudaTransfer, ASnapshotCapturedAsynchronouslyIsTheStateAtTheCall) {
  FLASHKV_REQUIRE_GPU();
  CudaBackend* gpu = SharedCuda();
  // A Flash-like layer mix at 3,000 tokens, so the closed rows are many megabytes.
  KvShape shape;
  shape.head_dim = 512;
  shape.n_swa = 128;
  shape.indexer_dim = 128;
  shape.ctx_size = 4096;
  shape.layers = {KvLayerShape{0, false, false}, KvLayerShape{4, true, true},
                  KvLayerShape{128, false, false}, KvLayerShape{4, true, true}};
  KvState st = RandomState(*gpu, shape, 3000, 31);
  std::vector<int32_t> tokens = Tokens(3000);
  std::vector<float> logits = Logits(64);
  SnapshotContent content;
  content.tokens = tokens;
  content.logits = logits;
  auto sync = CaptureSnapshot(st, TestIdentity(), content, 1000);
  ASSERT_TRUE(sync.ok()) << sync.status().ToString();
  auto img = PrepareSnapshot(st, TestIdentity(), content, 1000);
  ASSERT_TRUE(img.ok());
  ASSERT_TRUE(img->Pin(*gpu).ok());
  ASSERT_TRUE(img->pinned());
  auto pending = CaptureSnapshotLayersAsync(st, *img);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_GT(pending->deferred_bytes, size_t(3)
                                         << 20);  // 2 ratio-4 layers: 750 rows of 512 + 128 floats
  // What the next decode step writes: the ring and the frontiers.
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    gpu->Fill(st.layer(int(l)).ring, 9.0f, size_t(shape.n_swa) * shape.head_dim);
  }
  ASSERT_TRUE(pending->Wait().ok());
  ASSERT_EQ(img->size(), sync->size());
  EXPECT_EQ(std::memcmp(img->data(), sync->data(), img->size()), 0);
  ASSERT_TRUE(gpu->Synchronize().ok());
}

TEST(CudaTransfer, DeviceMemoryIsReported) {
  FLASHKV_REQUIRE_GPU();
  CudaBackend* gpu = SharedCuda();
  auto m = gpu->DeviceMemory();
  ASSERT_TRUE(m.has_value());
  EXPECT_GT(m->total_bytes, uint64_t(1) << 30);
  EXPECT_LE(m->free_bytes, m->total_bytes);
  CpuBackend cpu(nullptr);
  EXPECT_FALSE(cpu.DeviceMemory().has_value());
}

}  // namespace
}  // namespace flashkv::testing
