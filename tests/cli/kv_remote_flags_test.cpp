#include "cli/kv_remote_flags.h"

#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace flashkv::cli {
namespace {

TEST(KvRemoteFlagsTest, FlagsParseAndOpeningChecksThem) {
  CLI::App app;
  KvRemoteFlags f;
  AddKvRemoteFlags(&app, &f);
  std::string error;
  ASSERT_TRUE(testing::Parse(app, {}, &error)) << error;
  EXPECT_TRUE(f.url.empty());
  EXPECT_EQ(f.timeout_ms, 2000);
  ASSERT_TRUE(testing::Parse(
      app, {"--kv-remote", "redis://127.0.0.1:1/2", "--kv-remote-timeout-ms", "300"}, &error))
      << error;
  const SnapshotIdentity id{Sha1Of("m"), "official/q8"};
  // Opening does not connect: nothing listens on port 1, and that is only a miss later.
  auto tier = OpenRemoteTier(f, id);
  ASSERT_TRUE(tier.ok()) << tier.status().ToString();
  EXPECT_EQ((*tier)->options().store.address.db, 2);
  EXPECT_EQ((*tier)->options().store.command_timeout_ms, 300);
  EXPECT_EQ((*tier)->options().store.connect_timeout_ms, 75);
  EXPECT_EQ((*tier)->options().numerics, "official/q8");

  f.timeout_ms = 0;
  EXPECT_EQ(OpenRemoteTier(f, id).status().code(), StatusCode::kInvalidArgument);
  f.timeout_ms = 2000;
  f.url = "redis://127.0.0.1";
  EXPECT_EQ(OpenRemoteTier(f, id).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashkv::cli
