#include "util/host_memory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

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

// /proc/mounts names each mount's filesystem: the test's own reading of what statfs should say.
TEST(HostMemoryTest, KnowsAFileKeptInMemoryFromOneOnDisk) {
  EXPECT_FALSE(OnMemoryFilesystem("/no/such/path/flashkv"));
  EXPECT_FALSE(OnMemoryFilesystem("/proc/self"));  // procfs
  std::ifstream mounts("/proc/mounts");
  bool shm_is_tmpfs = false;
  for (std::string dev, dir, type; mounts >> dev >> dir >> type;) {
    if (dir == "/dev/shm") shm_is_tmpfs = type == "tmpfs";
    std::string rest;
    std::getline(mounts, rest);
  }
  if (!shm_is_tmpfs) GTEST_SKIP() << "/dev/shm is not a tmpfs mount here";
  EXPECT_TRUE(OnMemoryFilesystem("/dev/shm"));
}

}  // namespace
}  // namespace flashkv
