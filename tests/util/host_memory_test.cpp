#include "util/host_memory.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(HostMemoryTest, ParsesMemAvailableInKibibytes) {
  const char* meminfo =
      "MemTotal:       24607468 kB\n"
      "MemFree:        23000000 kB\n"
      "MemAvailable:   23456789 kB\n"
      "Buffers:           1234 kB\n";
  auto n = ParseMemAvailable(meminfo);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, uint64_t(23456789) << 10);
}

TEST(HostMemoryTest, RejectsAMissingOrMalformedField) {
  EXPECT_EQ(ParseMemAvailable("MemTotal: 1 kB\n").status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: lots\n").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: 12 MB\n").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: 99999999999999999999999 kB\n").status().code(),
            StatusCode::kCorrupt);
}

TEST(HostMemoryTest, ThisMachineReportsSomeMemory) {
  auto n = AvailableHostMemory();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_GT(*n, 0u);
}

}  // namespace
}  // namespace flashkv
