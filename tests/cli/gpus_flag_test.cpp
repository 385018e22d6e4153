// --gpus: the device list against a device count (no GPU needed), and what Runtime::Open
// refuses before it touches a device.
#include "cli/gpus_flag.h"

#include <gtest/gtest.h>

#include "runtime/runtime.h"

namespace flashkv::cli {
namespace {

TEST(GpusFlagTest, ListsAndAuto) {
  auto two = ParseGpus("1,0", 4, "");
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(*two, (std::vector<int>{1, 0}));
  auto all = ParseGpus("auto", 3, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<int>{0, 1, 2}));
  auto one = ParseGpus("0", 1, "");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<int>{0});
}

TEST(GpusFlagTest, MalformedListsAreRefusedWhateverTheDevices) {
  for (const char* bad : {"", ",", "0,", ",1", "a", "0,x", "-1", "1.5", " 0", "0 ", "auto,1"}) {
    for (int present : {0, 4}) {
      auto r = ParseGpus(bad, present, "test");
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "'" << bad << "' " << present;
      EXPECT_NE(r.status().ToString().find("--gpus must be auto or a comma-separated list"),
                std::string::npos)
          << r.status().ToString();
    }
  }
  auto twice = ParseGpus("0,1,0", 4, "");
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().ToString().find("device 0 is listed twice"), std::string::npos);
}

TEST(GpusFlagTest, MissingDevicesAreNamed) {
  auto missing = ParseGpus("0,3", 2, "");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().ToString().find("device 3 does not exist (2 CUDA devices present)"),
            std::string::npos)
      << missing.status().ToString();
  for (const char* spec : {"0", "auto"}) {
    auto none = ParseGpus(spec, 0, "this build has no CUDA");
    EXPECT_EQ(none.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(none.status().ToString().find("no CUDA device (this build has no CUDA)"),
              std::string::npos)
        << none.status().ToString();
  }
}

TEST(GpusFlagTest, RuntimeRefusesSeveralDevicesAndTheCpuBackend) {
  // Several devices are expert parallel; a build without CUDA says so.
  RuntimeOptions several;
  several.model_path = "unused.gguf";
  several.backend = "cuda";
  several.gpus = {0, 1};
  auto r = Runtime::Open(several);
  EXPECT_FALSE(r.ok());
  if (!Runtime::HasBackend("cuda")) {
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(r.status().ToString().find("built without CUDA"), std::string::npos)
        << r.status().ToString();
  }

  // --expert-shards is the CPU form of several --gpus.
  RuntimeOptions shards_on_cuda = several;
  shards_on_cuda.gpus.clear();
  shards_on_cuda.expert_shards = 2;
  auto sc = Runtime::Open(shards_on_cuda);
  EXPECT_EQ(sc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sc.status().ToString().find("--expert-shards is the CPU form of several --gpus"),
            std::string::npos)
      << sc.status().ToString();
  RuntimeOptions negative;
  negative.model_path = "unused.gguf";
  negative.backend = "cpu";
  negative.expert_shards = -1;
  EXPECT_EQ(Runtime::Open(negative).status().code(), StatusCode::kInvalidArgument);

  RuntimeOptions cpu;
  cpu.model_path = "unused.gguf";
  cpu.backend = "cpu";
  cpu.gpus = {0};
  auto c = Runtime::Open(cpu);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().ToString().find("--gpus needs the cuda backend, not cpu"), std::string::npos)
      << c.status().ToString();
}

}  // namespace
}  // namespace flashkv::cli
