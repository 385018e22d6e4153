// Writing a snapshot while it is being captured (PrepareSnapshot + CaptureSnapshotLayers
// on one thread, StreamSnapshotImage on another) gives byte for byte the file of
// CaptureSnapshot + SealSnapshot + WriteSnapshotImage, for any chunk size and with or
// without O_DIRECT; a write cut short never leaves a file with a valid header.
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "snapshot/snapshot_codec.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

using testing::Logits;
using testing::MakeTempDir;
using testing::RandomState;
using testing::SmallShape;
using testing::TestIdentity;
using testing::Tokens;

constexpr int kVocab = 1000;

struct Fixture {
  CpuBackend be{nullptr};
  KvShape shape = SmallShape(2048);
  KvState st = RandomState(be, shape, 1500, 3);
  std::vector<int32_t> tokens = Tokens(1500);
  std::vector<float> logits = Logits(kVocab);
  std::string text = std::string(777, 't');  // unaligned section ends
  std::string replay = std::string(333, 'r');
  SnapshotContent Content() const {
    SnapshotContent c;
    c.tokens = tokens;
    c.logits = logits;
    c.text = text;
    c.reason = SaveReason::kContinued;
    c.replay = replay;
    c.extensions = {SnapshotExtension{SnapshotTag("TST1"), std::string(5000, 'e')}};
    return c;
  }
};

std::string Reference(const Fixture& fx, const std::string& dir) {
  auto img = CaptureSnapshot(fx.st, TestIdentity(), fx.Content(), 42);
  EXPECT_TRUE(img.ok());
  SealSnapshot(*img);
  const std::string path = JoinPath(dir, "reference.kv");
  auto f = File::Create(path);
  EXPECT_TRUE(f.ok());
  EXPECT_TRUE(WriteSnapshotImage(*img, *f).ok());
  EXPECT_TRUE(f->Close().ok());
  auto bytes = ReadWholeFile(path);
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

TEST(SnapshotStreamTest, StreamingWhileCapturingWritesTheSameFile) {
  Fixture fx;
  const std::string dir = MakeTempDir("stream");
  const std::string want = Reference(fx, dir);
  ASSERT_GT(want.size(), 6u * 4096) << "several chunks of the smallest size";
  int run = 0;
  for (size_t chunk : {size_t(1), size_t(4096), size_t(12288), size_t(16) << 20}) {
    for (bool direct : {true, false}) {
      auto img = PrepareSnapshot(fx.st, TestIdentity(), fx.Content(), 42);
      ASSERT_TRUE(img.ok()) << img.status().ToString();
      const std::string path = JoinPath(dir, fmt::format("s{}.kv", run++));
      auto f = File::Create(path);
      ASSERT_TRUE(f.ok());

      std::mutex mu;
      std::condition_variable cv;
      uint64_t ready = 0;
      std::vector<uint64_t> reports;
      std::thread capture([&] {
        Status s = CaptureSnapshotLayers(fx.st, *img, [&](uint64_t n) {
          std::lock_guard<std::mutex> lock(mu);
          reports.push_back(n);
          ready = n;
          cv.notify_all();
        });
        EXPECT_TRUE(s.ok()) << s.ToString();
      });
      uint64_t last_wait = 0;
      SnapshotWriteOptions o;
      o.chunk_bytes = chunk;
      o.direct = direct;
      Status st = StreamSnapshotImage(
          *img, *f,
          [&](uint64_t end) {
            EXPECT_GE(end, last_wait) << "waits move forward";
            last_wait = end;
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return ready >= end; });
            return Status::Ok();
          },
          o);
      capture.join();
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_TRUE(f->SyncData().ok());
      ASSERT_TRUE(f->Close().ok());
      EXPECT_TRUE(img->sealed());
      ASSERT_EQ(reports.size(), fx.shape.layers.size());
      EXPECT_TRUE(std::is_sorted(reports.begin(), reports.end()));
      EXPECT_EQ(reports.back(), img->size());
      EXPECT_EQ(reports[0], img->header().sections[5].offset) << "layer 0 done: up to layer 1";
      auto got = ReadWholeFile(path);
      ASSERT_TRUE(got.ok());
      EXPECT_TRUE(*got == want) << "chunk " << chunk << " direct " << direct;
      EXPECT_EQ(std::memcmp(img->data(), want.data(), want.size()), 0) << "image sealed too";
      EXPECT_TRUE(VerifySnapshotFile(path).ok());
    }
  }
}

// A capture that fails part way aborts the write with its error, and what was written
// has no header (it goes last): the file can never be taken for a snapshot.
TEST(SnapshotStreamTest, AbortedStreamLeavesNoValidHeader) {
  Fixture fx;
  const std::string dir = MakeTempDir("stream");
  for (bool direct : {true, false}) {
    auto img = PrepareSnapshot(fx.st, TestIdentity(), fx.Content(), 42);
    ASSERT_TRUE(img.ok());
    ASSERT_TRUE(CaptureSnapshotLayers(fx.st, *img).ok());
    const std::string path = JoinPath(dir, direct ? "d.kv" : "b.kv");
    auto f = File::Create(path);
    ASSERT_TRUE(f.ok());
    const uint64_t cut = img->size() / 2;
    SnapshotWriteOptions o;
    o.chunk_bytes = 4096;
    o.direct = direct;
    Status st = StreamSnapshotImage(
        *img, *f,
        [&](uint64_t end) {
          return end > cut ? IoError("capture failed at {}", end) : Status::Ok();
        },
        o);
    EXPECT_EQ(st.code(), StatusCode::kIoError);
    EXPECT_FALSE(img->sealed());
    ASSERT_TRUE(f->Close().ok());
    auto r = File::OpenRead(path);
    ASSERT_TRUE(r.ok());
    auto size = r->Size();
    ASSERT_TRUE(size.ok());
    EXPECT_GT(*size, 4096u) << "the payload before the cut was written";
    EXPECT_LE(*size, cut);
    EXPECT_EQ(ReadSnapshotHeader(*r).status().code(), StatusCode::kCorrupt);
    EXPECT_FALSE(VerifySnapshotFile(path).ok());
  }
}

}  // namespace
}  // namespace flashkv
