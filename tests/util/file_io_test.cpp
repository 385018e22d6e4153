#include "util/file_io.h"

#include <sys/stat.h>
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

// The durable write every writer of the cache directory shares: the bytes reach the final
// name only whole (temp, fdatasync, rename); a failed write leaves no temp and the old file.
TEST(FileIoTest, WriteFileDurablyRenamesOnlyWholeFiles) {
  const std::string dir = TempDir();
  const std::string path = JoinPath(dir, "entry");
  const std::string tmp = path + ".tmp.1";
  bool before = false;
  ASSERT_TRUE(WriteFileDurably(
                  tmp, path, [](File& f) { return f.Write("first", 5); }, [&] { before = true; })
                  .ok());
  EXPECT_TRUE(before);
  EXPECT_EQ(*ReadWholeFile(path), "first");
  EXPECT_EQ(File::OpenRead(tmp).status().code(), StatusCode::kNotFound);

  Status failed = WriteFileDurably(tmp, path, [](File& f) -> Status {
    EXPECT_TRUE(f.Write("sec", 3).ok());
    return IoError("disk full");
  });
  EXPECT_EQ(failed.code(), StatusCode::kIoError);
  EXPECT_EQ(*ReadWholeFile(path), "first");
  EXPECT_EQ(File::OpenRead(tmp).status().code(), StatusCode::kNotFound);

  // Synced but not renamed: the caller renames (under a lock of its own) or removes it.
  ASSERT_TRUE(WriteFileSynced(tmp, [](File& f) { return f.Write("third", 5); }).ok());
  EXPECT_EQ(*ReadWholeFile(tmp), "third");
  EXPECT_FALSE(WriteFileSynced(tmp, [](File&) { return Status::Ok(); }).ok());  // exclusive
}

// A FIFO, a directory or a sparse giant in place of a cache file: refused at once, never
// a blocked open (issue 34: a FIFO chunk held the engine worker for good) or a giant
// allocation (a sparse 100 GiB chunk aborted `kv verify`).
TEST(FileIoTest, OpenReadRefusesAnythingButARegularFileWithoutBlocking) {
  const std::string dir = TempDir();
  const std::string fifo = JoinPath(dir, "x.kvc");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = File::OpenRead(fifo);  // no writer: a blocking open would never return
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos);
  EXPECT_EQ(ReadWholeFile(fifo).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(File::OpenRead(dir).status().code(), StatusCode::kCorrupt);

  const std::string sparse = JoinPath(dir, "big.kvc");
  {
    auto w = File::Create(sparse);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Close().ok());
  }
  ASSERT_EQ(::truncate(sparse.c_str(), off_t(100) << 30), 0);
  auto big = ReadWholeFile(sparse, uint64_t(1) << 20);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kCorrupt);
  ASSERT_TRUE(RemoveFile(sparse).ok());
}

// Issue 34: a cache file must belong to the cache's uid (File::OpenRead's `owner`, which
// the disk cache sets to its effective uid); a file someone else owns is refused like
// damage. Any file of ours is "owned by someone else" for an owner uid that is not ours.
TEST(FileIoTest, OpenReadWithAnOwnerRefusesAFileSomeoneElseOwns) {
  const std::string dir = TempDir();
  const std::string path = JoinPath(dir, "a.kv");
  {
    auto w = File::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Write("abc", 3).ok());
  }
  const uint32_t me = uint32_t(::geteuid());
  EXPECT_TRUE(File::OpenRead(path).ok());
  EXPECT_TRUE(File::OpenRead(path, me).ok());
  auto other = File::OpenRead(path, me + 1);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(other.status().message().find("is owned by uid " + std::to_string(me) +
                                          ", not by this process's uid " + std::to_string(me + 1)),
            std::string::npos)
      << other.status().ToString();
  ASSERT_TRUE(RemoveFile(path).ok());
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
