// The write budget's window file: round trip, expiry, a clock set back, and damage of
// every kind ignored (the window then starts empty).
#include "kv_disk/disk_write_window.h"

#include <string>

#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

constexpr int64_t kT0 = 1'800'000'000'000;
constexpr int64_t kHour = int64_t(3600) * 1000;

TEST(DiskWriteWindowTest, CountsADayAndMergesAMinute) {
  DiskWriteWindow w;
  w.Add(kT0, 100);
  w.Add(kT0 + 30'000, 50);  // same minute: one bucket
  w.Add(kT0 + 2 * kHour, 7);
  EXPECT_EQ(w.buckets(), 2u);
  EXPECT_EQ(w.InWindow(kT0 + 2 * kHour), 157u);
  // The merged bucket leaves a day after its last write, never earlier.
  EXPECT_EQ(w.InWindow(kT0 + 24 * kHour + 1), 157u);
  EXPECT_EQ(w.InWindow(kT0 + 30'000 + 24 * kHour), 7u);
  EXPECT_EQ(w.InWindow(kT0 + 26 * kHour), 0u);
  w.Add(kT0 + 26 * kHour, 1);
  EXPECT_EQ(w.buckets(), 1u);
}

TEST(DiskWriteWindowTest, FileRoundTripDropsOldAndClampsFutureBuckets) {
  const std::string dir = testing::MakeTempDir("write-window");
  DiskWriteWindow w;
  w.Add(kT0 - 30 * kHour, 1000);  // already out of the window at kT0
  w.Add(kT0 - kHour, 20);
  w.Add(kT0 + 5 * kHour, 3);  // "future": the clock was set back to kT0
  ASSERT_TRUE(DiskWriteWindow::StoreFile(dir, w.Encode()).ok());
  DiskWriteWindow r;
  ASSERT_TRUE(DiskWriteWindow::LoadFile(dir, kT0, &r).ok());
  EXPECT_EQ(r.InWindow(kT0), 23u);
  EXPECT_EQ(r.buckets(), 2u);
  // The future bucket now counts from kT0: a day from now it is gone.
  EXPECT_EQ(r.InWindow(kT0 + 24 * kHour - 1), 3u);
  EXPECT_EQ(r.InWindow(kT0 + 24 * kHour), 0u);
  // No file: an empty window, Ok.
  DiskWriteWindow e;
  ASSERT_TRUE(DiskWriteWindow::LoadFile(testing::MakeTempDir("write-window-none"), kT0, &e).ok());
  EXPECT_EQ(e.buckets(), 0u);
}

TEST(DiskWriteWindowTest, EveryDamageIsRefusedAndLeavesItEmpty) {
  DiskWriteWindow w;
  w.Add(kT0, 100);
  w.Add(kT0 + kHour, 200);
  const std::string good = w.Encode();
  DiskWriteWindow r;
  ASSERT_TRUE(r.Decode(good, kT0 + kHour).ok());
  EXPECT_EQ(r.InWindow(kT0 + kHour), 300u);
  for (size_t at = 0; at < good.size(); ++at) {
    for (uint8_t bit : {uint8_t(0x01), uint8_t(0x80)}) {
      std::string bad = good;
      bad[at] ^= char(bit);
      EXPECT_FALSE(r.Decode(bad, kT0 + kHour).ok()) << "byte " << at;
      EXPECT_EQ(r.buckets(), 0u);
    }
  }
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(r.Decode(good.substr(0, n), kT0).ok()) << n;
  }
  EXPECT_FALSE(r.Decode(good + "x", kT0).ok());
}

}  // namespace
}  // namespace flashkv
