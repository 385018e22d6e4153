#include "cli/flag_suggest.h"

#include <gtest/gtest.h>

namespace flashkv::cli {
namespace {

TEST(FlagSuggestTest, ClosestFlagFindsTyposAndUniquePrefixes) {
  const std::vector<std::string> known = {"--ctx",           "-c",           "--ctx-size", "--port",
                                          "--prefill-chunk", "--kv-disk-dir"};
  EXPECT_EQ(ClosestFlag("--ctx-sze", known), "--ctx-size");
  EXPECT_EQ(ClosestFlag("--prot", known), "--port");
  EXPECT_EQ(ClosestFlag("--prefill", known), "--prefill-chunk");  // a unique prefix
  EXPECT_EQ(ClosestFlag("--kv-disc-dir", known), "--kv-disk-dir");
  EXPECT_EQ(ClosestFlag("--temperature", known), "");  // nothing close
}

TEST(FlagSuggestTest, HintsNameTheSubcommandAndSkipKnownFlagsAndValues) {
  CLI::App app;
  std::string level;
  app.add_option("--log-level", level);
  auto* serve = app.add_subcommand("serve");
  int ctx = 0, port = 0;
  serve->add_option("--ctx,-c,--ctx-size", ctx);
  serve->add_option("--port", port);
  const std::vector<std::string> args = {"flashkv", "--log-level", "info",   "serve", "-c",
                                         "4096",    "--ctx-sze=5", "--port", "-1"};
  const std::vector<std::string> hints = UnknownFlagHints(app, args);
  ASSERT_EQ(hints.size(), 1u);
  EXPECT_EQ(hints[0], "unknown flag --ctx-sze for `flashkv serve`; did you mean --ctx-size?");
}

}  // namespace
}  // namespace flashkv::cli
