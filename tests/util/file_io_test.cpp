#include "util/file_io.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "fileio.XXXXXX";
  char* d = ::mkdtemp(tmpl.data());
  EXPECT_NE(d, nullptr);
  return tmpl;
}

TEST(FileIoTest, WriteReadRenameList) {
  const std::string dir = TempDir();
  const std::string sub = JoinPath(dir, "a/b");
  ASSERT_TRUE(CreateDirectories(sub).ok());
  const std::string tmp = JoinPath(sub, "x.tmp");
  {
    auto f = File::Create(tmp, /*exclusive=*/true);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(f->Write("hello world", 11).ok());
    ASSERT_TRUE(f->WriteAt(0, "J", 1).ok());
    ASSERT_TRUE(f->Sync().ok());
    ASSERT_TRUE(f->Close().ok());
  }
  EXPECT_FALSE(File::Create(tmp, /*exclusive=*/true).ok());
  const std::string final_path = JoinPath(sub, "x");
  ASSERT_TRUE(RenameDurably(tmp, final_path).ok());
  auto all = ReadWholeFile(final_path);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, "Jello world");

  auto f = File::OpenRead(final_path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->Size(), 11u);
  char buf[5] = {};
  ASSERT_TRUE(f->ReadAt(6, buf, 5).ok());
  EXPECT_EQ(std::string(buf, 5), "world");
  Status s = f->ReadAt(8, buf, 5);  // past the end
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.ToString();

  auto list = ListDirectory(sub);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "x");
  EXPECT_TRUE((*list)[0].is_regular);
  EXPECT_EQ((*list)[0].size, 11u);

  ASSERT_TRUE(RemoveFile(final_path).ok());
  EXPECT_TRUE(RemoveFile(final_path).ok());  // missing is fine by default
  EXPECT_EQ(RemoveFile(final_path, false).code(), StatusCode::kNotFound);
  EXPECT_EQ(File::OpenRead(final_path).status().code(), StatusCode::kNotFound);
  EXPECT_NE(File::OpenRead(final_path).status().message().find(final_path), std::string::npos);
}

TEST(FileIoTest, CreateDirectoriesRejectsAFile) {
  const std::string dir = TempDir();
  const std::string file = JoinPath(dir, "f");
  ASSERT_TRUE(File::Create(file).ok());
  EXPECT_FALSE(CreateDirectories(file).ok());
  EXPECT_EQ(JoinPath("d/", "x"), "d/x");
  EXPECT_EQ(JoinPath("d", "x"), "d/x");
}

}  // namespace
}  // namespace flashkv
