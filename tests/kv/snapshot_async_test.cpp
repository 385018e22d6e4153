// CaptureSnapshotLayersAsync: the image equals a synchronous capture taken at the same
// moment although the state's mutable sections change right after the call (decoding goes
// on), and anything that could rewrite the closed rows waits for the copies first.
#include <cstring>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "snapshot/snapshot_codec.h"

namespace flashkv {
namespace {

using testing::Logits;
using testing::RandomState;
using testing::SmallShape;
using testing::TestIdentity;
using testing::Tokens;

constexpr int kVocab = 50;

// A CPU backend whose asynchronous copies run only when waited for: a state that rewrote
// its rows before waiting would show in the image.
class DeferredCopyBackend : public CpuBackend {
 public:
  DeferredCopyBackend() : CpuBackend(nullptr) {}
  Expected<uint64_t> ReadManyAsync(const HostCopy* copies, size_t n) override {
    queued.emplace_back(++next, std::vector<HostCopy>(copies, copies + n));
    return next;
  }
  Status WaitCopies(uint64_t ticket) override {
    ++waits;
    while (!queued.empty() && queued.front().first <= ticket) {
      for (const HostCopy& c : queued.front().second) std::memcpy(c.host, c.device.get(), c.bytes);
      queued.pop_front();
    }
    return Status::Ok();
  }
  std::deque<std::pair<uint64_t, std::vector<HostCopy>>> queued;
  uint64_t next = 1;
  int waits = 0;
};

struct Prepared {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  SnapshotImage image;
};

Prepared Prepare(const KvState& st) {
  std::vector<int32_t> tokens = Tokens(st.n_tokens());
  std::vector<float> logits = Logits(kVocab);
  SnapshotContent c;
  c.tokens = tokens;
  c.logits = logits;
  c.reason = SaveReason::kContinued;
  auto img = PrepareSnapshot(st, TestIdentity(), c, 1000);
  EXPECT_TRUE(img.ok()) << img.status().ToString();
  return Prepared{std::move(tokens), std::move(logits), std::move(*img)};
}

std::vector<uint8_t> Bytes(const SnapshotImage& img) {
  return std::vector<uint8_t>(img.data(), img.data() + img.size());
}

// What a decode step writes: the ring and the frontiers (never a closed row).
void TouchMutable(Backend& be, const KvState& st) {
  for (size_t l = 0; l < st.shape().layers.size(); ++l) {
    const KvState::Layer& L = st.layer(int(l));
    be.Fill(L.ring, 42.0f, size_t(st.shape().n_swa) * st.shape().head_dim);
    if (st.shape().layers[l].compress_ratio == 0) continue;
    be.Fill(L.comp_state_kv, 43.0f, 1);
  }
}

TEST(SnapshotAsyncTest, TheImageIsTheStateAtTheCallWhileDecodingGoesOn) {
  CpuBackend be(nullptr);
  // 37 tokens: a wrapped ring, 9 closed ratio-4 windows with indexer rows, 4 ratio-8.
  KvState st = RandomState(be, SmallShape(64), 37, 21);
  Prepared sync = Prepare(st);
  ASSERT_TRUE(CaptureSnapshotLayers(st, sync.image).ok());
  Prepared async = Prepare(st);
  auto pending = CaptureSnapshotLayersAsync(st, async.image);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_GT(pending->deferred_bytes, 0u);
  TouchMutable(be, st);
  ASSERT_TRUE(pending->Wait().ok());
  EXPECT_EQ(Bytes(async.image), Bytes(sync.image));
}

TEST(SnapshotAsyncTest, RewritingTheStateWaitsForTheCopiesFirst) {
  DeferredCopyBackend be;
  KvState st = RandomState(be, SmallShape(64), 37, 22);
  Prepared sync = Prepare(st);
  ASSERT_TRUE(CaptureSnapshotLayers(st, sync.image).ok());
  Prepared async = Prepare(st);
  auto pending = CaptureSnapshotLayersAsync(st, async.image);
  ASSERT_TRUE(pending.ok());
  ASSERT_FALSE(be.queued.empty());  // the closed rows have not moved yet
  // A restore into the same state overwrites every row: it must let the copies finish.
  std::vector<float> zeros(st.LayerFloats(1), 0.0f);
  ASSERT_TRUE(st.WriteLayer(1, zeros.data()).ok());
  EXPECT_TRUE(be.queued.empty());
  EXPECT_GT(be.waits, 0);
  ASSERT_TRUE(pending->Wait().ok());
  EXPECT_EQ(Bytes(async.image), Bytes(sync.image));

  // Clearing and destroying wait too.
  Prepared again = Prepare(st);
  ASSERT_TRUE(CaptureSnapshotLayersAsync(st, again.image).ok());
  ASSERT_FALSE(be.queued.empty());
  ASSERT_TRUE(st.Clear().ok());
  EXPECT_TRUE(be.queued.empty());
  {
    std::optional<Prepared> p;  // outlives `other`, whose destructor lands the copies in it
    KvState other = RandomState(be, SmallShape(64), 20, 23);
    p.emplace(Prepare(other));
    ASSERT_TRUE(CaptureSnapshotLayersAsync(other, p->image).ok());
    ASSERT_FALSE(be.queued.empty());
  }
  EXPECT_TRUE(be.queued.empty());
}

TEST(SnapshotAsyncTest, AWaitForOneLayerLeavesLaterLayersInFlight) {
  DeferredCopyBackend be;
  KvState st = RandomState(be, SmallShape(64), 37, 24);
  Prepared p = Prepare(st);
  auto pending = CaptureSnapshotLayersAsync(st, p.image);
  ASSERT_TRUE(pending.ok());
  // Layer 0 is sliding only: nothing deferred. Layers 1 and 2 each have their own ticket.
  ASSERT_EQ(pending->layers.size(), 3u);
  EXPECT_EQ(pending->layers[0].ticket, 0u);
  EXPECT_NE(pending->layers[1].ticket, 0u);
  EXPECT_NE(pending->layers[2].ticket, 0u);
  ASSERT_TRUE(pending->Wait(pending->layers[1].start + 1).ok());
  EXPECT_EQ(be.queued.size(), 1u);  // layer 2's copy
  ASSERT_TRUE(pending->Wait().ok());
  EXPECT_TRUE(be.queued.empty());
}

}  // namespace
}  // namespace flashkv
