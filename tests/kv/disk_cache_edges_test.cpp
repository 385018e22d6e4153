// The cache directory's edges (issue 17 finding 9): what is not an entry file under an
// entry's name is logged once and moved out of the way, so saves of that key keep
// working; a directory deleted while in use is recreated with its lock taken again, and
// when another process has taken it meanwhile the disk tier is disabled with a clear log.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "kv_disk/disk_cache.h"
#include "kv_test_util.h"
#include "log_capture.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

using testing::LayerOf;
using testing::LogCapture;
using testing::Logits;
using testing::MakeTempDir;
using testing::RandomState;
using testing::SmallShape;
using testing::TestIdentity;
using testing::Tokens;

constexpr int kVocab = 1000;

class DiskCacheEdgesTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("diskcache-edges"); }

  DiskCacheOptions Options() const {
    DiskCacheOptions o;
    o.dir = dir_;
    o.identity = TestIdentity();
    return o;
  }
  // Saves a state of `n` ids (salt `salt`); the key, or the error.
  Expected<std::string> Save(DiskCache& cache, int64_t n, int32_t salt) {
    KvState st = RandomState(be_, SmallShape(), n, uint32_t(salt + 1));
    const auto ids = Tokens(n, salt);
    const auto logits = Logits(kVocab);
    SnapshotContent c;
    c.tokens = ids;
    c.logits = logits;
    auto key = cache.Save(st, c);
    if (!key.ok()) return key;
    Status flushed = cache.Flush();
    if (!flushed.ok()) return flushed;
    layers_[salt] = LayerOf(st, 1);
    return key;
  }
  bool Loads(DiskCache& cache, int64_t n, int32_t salt) {
    KvState dst = RandomState(be_, SmallShape(), 1, 99);
    auto hit = cache.Load(DiskLookup{.tokens = Tokens(n, salt), .text = {}}, dst);
    return hit.ok() && LayerOf(dst, 1) == layers_[salt];
  }
  std::string EntryPath(int64_t n, int32_t salt) const {
    return JoinPath(dir_, SnapshotFileName(TokensKey(Tokens(n, salt))));
  }
  static bool IsDir(const std::string& p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  static bool Exists(const std::string& p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0;
  }

  CpuBackend be_{nullptr};
  std::string dir_;
  std::map<int32_t, std::vector<float>> layers_;
};

TEST_F(DiskCacheEdgesTest, NonFilesAtEntryNamesAreLoggedOnceAndMovedAside) {
  const std::string outside = dir_ + "-outside";
  {
    auto f = File::Create(outside, /*exclusive=*/false);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->WriteAt(0, "not a snapshot", 14).ok());
  }
  ASSERT_EQ(::mkdir(EntryPath(10, 1).c_str(), 0700), 0);               // a directory
  ASSERT_EQ(::symlink(outside.c_str(), EntryPath(10, 2).c_str()), 0);  // a link out
  ASSERT_EQ(::mkfifo(EntryPath(10, 3).c_str(), 0600), 0);              // a FIFO
  LogCapture log;
  {
    auto cache = DiskCache::Open(Options());
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    EXPECT_EQ(log.Count("where an entry file belongs"), 3) << log.text();
    EXPECT_EQ(log.Count("(a directory where"), 1);
    EXPECT_EQ(log.Count("(a symbolic link where"), 1);
    EXPECT_EQ(log.Count("(a FIFO where"), 1);
    for (int salt = 1; salt <= 3; ++salt) EXPECT_FALSE(Exists(EntryPath(10, salt))) << salt;
    // Each key saves and loads now.
    for (int salt = 1; salt <= 3; ++salt) {
      auto key = Save(**cache, 10, salt);
      ASSERT_TRUE(key.ok()) << salt << ": " << key.status().ToString();
      EXPECT_TRUE(Loads(**cache, 10, salt)) << salt;
    }
  }
  auto again = DiskCache::Open(Options());  // nothing left to complain about
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(log.Count("where an entry file belongs"), 3);
  EXPECT_EQ((*again)->List().size(), 3u);
  // The link was never followed: its target is as it was.
  auto target = ReadWholeFile(outside);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(*target, "not a snapshot");
}

// Issue 34: every file the cache reads must be owned by the cache's uid (its effective uid
// by default). Through the seam (DiskCacheOptions::owner_uid), so that it runs without
// root: a cache told that its uid is another one finds every file foreign — a manifest at
// the scan, a chunk at a load — and loads none, quarantines them, logs and counts them.
TEST_F(DiskCacheEdgesTest, FilesOwnedByAnotherUidAreNotLoaded) {
  DiskCacheOptions o = Options();
  o.chunk_tokens = 16;  // a multiple of SmallShape's ratios: 40 ids are 2 chunks + a manifest
  {
    auto cache = DiskCache::Open(o);
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    ASSERT_TRUE(Save(**cache, 40, 1).ok());
    ASSERT_TRUE(Save(**cache, 12, 2).ok());
    EXPECT_TRUE(Loads(**cache, 40, 1));
    EXPECT_TRUE(Loads(**cache, 12, 2));
  }
  LogCapture log;
  o.owner_uid = uint32_t(::geteuid()) + 1;
  auto other = DiskCache::Open(o);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_FALSE(Loads(**other, 40, 1));
  EXPECT_FALSE(Loads(**other, 12, 2));
  EXPECT_TRUE((*other)->List().empty());
  EXPECT_GE((*other)->stats().quarantined, 2u);
  EXPECT_GE(log.Count("is owned by uid " + std::to_string(::geteuid())), 2) << log.text();
  EXPECT_FALSE(Exists(EntryPath(40, 1)));  // moved to quarantine/
}

// The same with a file really owned by someone else, put in place while the cache runs:
// needs a chown to another uid (root outside a user namespace that lacks the uid).
TEST_F(DiskCacheEdgesTest, AFileChownedToAnotherUserWhileRunningIsNotLoaded) {
  constexpr uid_t kOther = 4242;
  {
    const std::string probe = JoinPath(dir_, "chown-probe");
    ASSERT_TRUE(File::Create(probe).ok());
    const int rc = ::lchown(probe.c_str(), kOther, kOther);
    const int err = errno;
    ASSERT_TRUE(RemoveFile(probe).ok());
    if (rc != 0) {
      GTEST_SKIP() << "cannot chown a file to uid " << kOther << " here (" << std::strerror(err)
                   << "); FilesOwnedByAnotherUidAreNotLoaded covers the check through "
                      "DiskCacheOptions::owner_uid";
    }
  }
  DiskCacheOptions o = Options();
  o.chunk_tokens = 16;
  LogCapture log;
  auto cache = DiskCache::Open(o);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  ASSERT_TRUE(Save(**cache, 40, 1).ok());
  ASSERT_TRUE(Save(**cache, 44, 3).ok());
  ASSERT_TRUE(Save(**cache, 12, 2).ok());
  // A manifest, and one chunk of another entry.
  ASSERT_EQ(::lchown(EntryPath(40, 1).c_str(), kOther, kOther), 0);
  EXPECT_FALSE(Loads(**cache, 40, 1));
  EXPECT_TRUE(Loads(**cache, 12, 2));
  EXPECT_EQ(log.Count("is owned by uid 4242"), 1) << log.text();
  EXPECT_EQ((*cache)->stats().quarantined, 1u);
  // A chunk: the entry of 44 ids names two (those of the quarantined manifest are gone).
  auto files = ListDirectory(JoinPath(dir_, "chunks"));
  ASSERT_TRUE(files.ok());
  ASSERT_FALSE(files->empty());
  for (const DirEntry& f : *files) {
    ASSERT_EQ(::lchown(JoinPath(JoinPath(dir_, "chunks"), f.name).c_str(), kOther, kOther), 0);
  }
  EXPECT_FALSE(Loads(**cache, 44, 3));
  EXPECT_EQ(log.Count("is owned by uid 4242"), 2) << log.text();
  // At the next start the scan refuses it too (the quarantined ones are not rescanned).
  cache->reset();
  ASSERT_EQ(::lchown(EntryPath(12, 2).c_str(), kOther, kOther), 0);
  auto again = DiskCache::Open(o);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(Loads(**again, 12, 2));
  EXPECT_GE(log.Count("is owned by uid 4242"), 3) << log.text();
}

TEST_F(DiskCacheEdgesTest, ADirectoryAppearingAtAnEntryNameDoesNotBreakItsSave) {
  auto cache = DiskCache::Open(Options());
  ASSERT_TRUE(cache.ok());
  ASSERT_EQ(::mkdir(EntryPath(12, 4).c_str(), 0700), 0);
  auto key = Save(**cache, 12, 4);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_FALSE(IsDir(EntryPath(12, 4)));
  EXPECT_TRUE(Loads(**cache, 12, 4));
}

TEST_F(DiskCacheEdgesTest, ADeletedDirectoryIsRecreatedAndLockedAgain) {
  auto cache = DiskCache::Open(Options());
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(Save(**cache, 10, 1).ok());
  ASSERT_EQ(std::system(("rm -rf '" + dir_ + "'").c_str()), 0);
  LogCapture log;
  auto key = Save(**cache, 11, 2);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(log.Count("was deleted while in use: recreated and locked again"), 1) << log.text();
  EXPECT_TRUE(Exists(EntryPath(11, 2)));
  EXPECT_TRUE(Loads(**cache, 11, 2));
  EXPECT_FALSE(Loads(**cache, 10, 1));  // went with the old directory
  EXPECT_EQ((*cache)->List().size(), 1u);
  // The lock is this process's again: a second cache cannot open the directory.
  auto second = DiskCache::Open(Options());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("locked by another process"), std::string::npos)
      << second.status().ToString();
}

TEST_F(DiskCacheEdgesTest, ADirectoryTakenByAnotherProcessDisablesTheDiskTier) {
  auto first = DiskCache::Open(Options());
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(Save(**first, 10, 1).ok());
  ASSERT_EQ(std::system(("rm -rf '" + dir_ + "'").c_str()), 0);
  // Another server recreates and locks the directory before the first notices: to the
  // first it was replaced.
  auto second = DiskCache::Open(Options());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  LogCapture log;
  auto key = Save(**first, 11, 2);
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(key.status().message().find("was replaced while in use and cannot be taken back"),
            std::string::npos)
      << key.status().ToString();
  EXPECT_NE(key.status().message().find("the disk tier is disabled"), std::string::npos);
  EXPECT_EQ(log.Count("the disk tier is disabled"), 1);
  // It stays disabled, quietly: loads find nothing, saves say why without logging again.
  EXPECT_FALSE(Loads(**first, 10, 1));
  EXPECT_FALSE(Save(**first, 12, 3).ok());
  EXPECT_EQ(log.Count("the disk tier is disabled"), 1);
  // The directory is the second's, which works undisturbed.
  ASSERT_TRUE(Save(**second, 13, 4).ok());
  EXPECT_TRUE(Loads(**second, 13, 4));
}

}  // namespace
}  // namespace flashkv
