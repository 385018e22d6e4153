#include "cli/kv_cache_flags.h"

#include <gtest/gtest.h>

#include "cli/model_flags.h"
#include "cli_test_util.h"

namespace flashkv::cli {
namespace {

TEST(KvCacheFlagsTest, FlagsFillTheStructAndKeepTheirDefaults) {
  CLI::App app;
  KvDiskFlags f;
  AddKvDiskFlags(&app, &f, "where snapshots go");
  std::string error;
  ASSERT_TRUE(testing::Parse(app, {}, &error)) << error;
  EXPECT_TRUE(f.dir.empty());
  EXPECT_EQ(f.space_mb, 4096u);
  EXPECT_EQ(f.quarantine, "on");
  const CachePolicyOptions defaults;
  EXPECT_EQ(f.policy.min_tokens, defaults.min_tokens);

  ASSERT_TRUE(testing::Parse(
      app,
      {"--kv-disk-dir", "d", "--kv-disk-space-mb", "7", "--kv-quarantine", "off",
       "--kv-disk-direct", "off", "--kv-cache-min-tokens", "5", "--kv-cache-cold-max-tokens", "6",
       "--kv-cache-continued-interval-tokens", "8", "--kv-cache-boundary-trim-tokens", "9",
       "--kv-cache-boundary-align-tokens", "10"},
      &error))
      << error;
  EXPECT_EQ(f.dir, "d");
  EXPECT_EQ(f.space_mb, 7u);
  EXPECT_EQ(f.quarantine, "off");
  EXPECT_EQ(f.direct, "off");
  EXPECT_EQ(f.policy.min_tokens, 5);
  EXPECT_EQ(f.policy.cold_max_tokens, 6);
  EXPECT_EQ(f.policy.continued_interval_tokens, 8);
  EXPECT_EQ(f.policy.boundary_trim_tokens, 9);
  EXPECT_EQ(f.policy.boundary_align_tokens, 10);
}

// A misspelt on/off is a command-line error, not a disk tier that silently fails to open
// while the server runs on without it.
TEST(KvCacheFlagsTest, OnOffFlagsRejectOtherValuesWhenParsed) {
  for (const char* flag : {"--kv-quarantine", "--kv-disk-direct"}) {
    CLI::App app;
    KvDiskFlags f;
    AddKvDiskFlags(&app, &f, "where snapshots go");
    std::string error;
    EXPECT_FALSE(testing::Parse(app, {flag, "maybe"}, &error)) << flag;
    EXPECT_NE(error.find("maybe"), std::string::npos) << error;
  }
}

TEST(KvCacheFlagsTest, OpenDiskCacheKeysTheCacheToTheModel) {
  testing::ScopedWorkDir work("flashkv_cli_kv_flags");
  ModelFlags mf;
  mf.model = testing::Ds4TinyPath();
  Expected<ModelSetup> setup = OpenModel(mf);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();

  KvDiskFlags f;
  f.dir = (work.path() / "kv").string();
  f.space_mb = 7;
  f.quarantine = "maybe";
  auto bad = OpenDiskCache(f, *setup);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--kv-quarantine must be on or off, got 'maybe'");

  f.quarantine = "off";
  f.direct = "sometimes";
  bad = OpenDiskCache(f, *setup);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--kv-disk-direct must be on or off, got 'sometimes'");

  f.direct = "off";
  auto cache = OpenDiskCache(f, *setup);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  const DiskCacheOptions& o = (*cache)->options();
  EXPECT_EQ(o.dir, f.dir);
  EXPECT_EQ(o.budget_bytes, uint64_t{7} << 20);
  EXPECT_FALSE(o.quarantine);
  EXPECT_FALSE(o.write.direct);
  EXPECT_FALSE(o.load.direct) << "restores follow the writes into the page cache";
  EXPECT_EQ(o.identity, CacheIdentity(*SetupFingerprint(*setup), setup->options));
}

}  // namespace
}  // namespace flashkv::cli
