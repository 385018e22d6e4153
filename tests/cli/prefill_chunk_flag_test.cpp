// --prefill-chunk-solo: "auto" per backend, numbers never below --prefill-chunk, and what is
// refused (no model needed).
#include "cli/prefill_chunk_flag.h"

#include <gtest/gtest.h>

namespace flashkv::cli {
namespace {

TEST(PrefillChunkFlagTest, AutoIsTheGpuChunkOnCudaAndThePrefillChunkOnTheCpu) {
  EXPECT_EQ(*ResolvePrefillChunkSolo("auto", 2048, "cuda"), kGpuSoloPrefillChunk);
  EXPECT_EQ(*ResolvePrefillChunkSolo("auto", 16384, "cuda"), 16384);
  EXPECT_EQ(*ResolvePrefillChunkSolo("auto", 2048, "cpu"), 2048);
  EXPECT_EQ(*ResolvePrefillChunkSolo("auto", 256, "cpu"), 256);
}

TEST(PrefillChunkFlagTest, NumbersAreNeverBelowThePrefillChunk) {
  EXPECT_EQ(*ResolvePrefillChunkSolo("4096", 2048, "cpu"), 4096);
  EXPECT_EQ(*ResolvePrefillChunkSolo("4096", 2048, "cuda"), 4096);
  EXPECT_EQ(*ResolvePrefillChunkSolo("1", 2048, "cuda"), 2048);  // off
}

TEST(PrefillChunkFlagTest, AnythingElseIsRefusedNamingTheFlag) {
  for (const char* bad : {"", "0", "-5", "x", "8k", "8192 ", " 8192", "1.5", "Auto"}) {
    auto r = ResolvePrefillChunkSolo(bad, 2048, "cuda");
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().ToString().find("--prefill-chunk-solo must be auto or a whole number"),
              std::string::npos)
        << r.status().ToString();
  }
}

}  // namespace
}  // namespace flashkv::cli
