// Which snapshot tiers `flashkv serve` runs with, from its flags (cli/cache_tiers.h): the
// rules RunServe used to hold inline, each flag combination once.
#include "cli/cache_tiers.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace flashkv::cli {
namespace {

using Order = std::vector<CacheSource>;

class CacheTiersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("flashkv-cache-tiers-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Nothing listens on port 1: opening the shared store does not connect.
  static constexpr const char* kStore = "redis://127.0.0.1:1";
  const SnapshotIdentity id_{Sha1Of("m"), "official/q8"};
  std::filesystem::path dir_;
};

TEST_F(CacheTiersTest, NoFlagsNoTiersAndNoIdentityNeeded) {
  CacheTierFlags f;
  EXPECT_FALSE(NeedsIdentity(f));
  auto t = OpenCacheTiers(f, std::nullopt, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Order(), Order{});
}

TEST_F(CacheTiersTest, EachTierAloneAndAllInTheirNumberedOrder) {
  CacheTierFlags ram;
  ram.ram_budget_bytes = uint64_t(8) << 20;
  EXPECT_TRUE(NeedsIdentity(ram));
  auto t = OpenCacheTiers(ram, id_, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Order(), Order{CacheSource::kRam});
  EXPECT_EQ(t->ram->options().budget_bytes, uint64_t(8) << 20);

  CacheTierFlags disk;
  disk.disk.dir = (dir_ / "a").string();
  EXPECT_TRUE(NeedsIdentity(disk));
  t = OpenCacheTiers(disk, id_, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Order(), Order{CacheSource::kDisk});
  EXPECT_EQ(t->remote, nullptr);

  CacheTierFlags all = ram;
  all.disk.dir = (dir_ / "b").string();
  all.remote.url = kStore;
  t = OpenCacheTiers(all, id_, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Order(), (Order{CacheSource::kRam, CacheSource::kDisk, CacheSource::kRemote}));
  EXPECT_EQ(t->remote->options().numerics, "official/q8");
  for (CacheSource s : t->Order()) {
    EXPECT_EQ(CacheTierNumber(s), s == CacheSource::kRam ? 2 : s == CacheSource::kDisk ? 3 : 4);
  }
}

TEST_F(CacheTiersTest, FlagsThatCannotWorkAreRefused) {
  CacheTierFlags no_disk;  // the shared store keeps its entries on the disk
  no_disk.remote.url = kStore;
  EXPECT_FALSE(NeedsIdentity(no_disk));
  EXPECT_EQ(OpenCacheTiers(no_disk, std::nullopt, nullptr).status().code(),
            StatusCode::kInvalidArgument);

  CacheTierFlags bad_url;
  bad_url.disk.dir = dir_.string();
  bad_url.remote.url = "redis://127.0.0.1";  // no port
  EXPECT_EQ(OpenCacheTiers(bad_url, id_, nullptr).status().code(), StatusCode::kInvalidArgument);

  CacheTierFlags no_space;
  no_space.disk.dir = dir_.string();
  no_space.disk.space_mb = 0;
  EXPECT_EQ(OpenCacheTiers(no_space, id_, nullptr).status().code(), StatusCode::kInvalidArgument);

  CacheTierFlags no_identity;
  no_identity.ram_budget_bytes = 1 << 20;
  EXPECT_EQ(OpenCacheTiers(no_identity, std::nullopt, nullptr).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(CacheTiersTest, ADiskThatCannotOpenIsLeftOutWithTheSharedStore) {
  std::filesystem::create_directories(dir_);
  const std::filesystem::path file = dir_ / "not-a-directory";
  std::ofstream(file) << "x";
  CacheTierFlags f;
  f.ram_budget_bytes = uint64_t(8) << 20;
  f.disk.dir = file.string();
  f.remote.url = kStore;
  auto t = OpenCacheTiers(f, id_, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->disk, nullptr);
  EXPECT_EQ(t->remote, nullptr);
  EXPECT_EQ(t->Order(), Order{CacheSource::kRam});
}

}  // namespace
}  // namespace flashkv::cli
