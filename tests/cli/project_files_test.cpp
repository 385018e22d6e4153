#include "cli/project_files.h"

#include <fstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace flashkv::cli {
namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(ProjectFilesTest, DefaultModelIsDs4FlashInTheWorkingDirectoryWhenPresent) {
  testing::ScopedWorkDir dir("flashkv_cli_default_model");
  // Without ./ds4flash.gguf: the tiny model, found above the executable or named relatively.
  const std::string tiny = DefaultModelPath();
  EXPECT_NE(tiny, "ds4flash.gguf");
  EXPECT_TRUE(EndsWith(tiny, "models/flashkv-tiny.gguf")) << tiny;

  std::ofstream("ds4flash.gguf") << "x";
  EXPECT_EQ(DefaultModelPath(), "ds4flash.gguf");
  Expected<std::string> resolved = ResolveModelPath("");
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(*resolved, "ds4flash.gguf");
}

TEST(ProjectFilesTest, ResolveModelPathKeepsAGivenPathAndExplainsAMissingOne) {
  Expected<std::string> given = ResolveModelPath(testing::Ds4TinyPath());
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(*given, testing::Ds4TinyPath());

  Expected<std::string> missing = ResolveModelPath("/no/such/dir/m.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "model /no/such/dir/m.gguf not found (make one with `flashkv make-tiny "
            "/no/such/dir/m.gguf`, or pass --model)");
}

}  // namespace
}  // namespace flashkv::cli
