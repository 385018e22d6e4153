#include "util/file_io_writer.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "fiowriter.XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

struct FreeBytes {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Chunks in any order, aligned or not, with or without O_DIRECT, land at their offsets;
// the unaligned tail and the unaligned middle chunk take the ordinary path.
TEST(ChunkedFileWriterTest, ChunksLandAtTheirOffsets) {
  const std::string dir = TempDir();
  constexpr size_t kSize = 5 * 4096 + 123;
  std::unique_ptr<uint8_t, FreeBytes> buf(
      static_cast<uint8_t*>(std::aligned_alloc(4096, 6 * 4096)));
  for (size_t i = 0; i < kSize; ++i) buf.get()[i] = uint8_t(i * 131 + 7);
  for (bool direct : {true, false}) {
    const std::string path = JoinPath(dir, direct ? "d" : "b");
    auto f = File::Create(path);
    ASSERT_TRUE(f.ok());
    {
      ChunkedFileWriter w(*f, /*depth=*/1, direct);
      const uint8_t* p = buf.get();
      ASSERT_TRUE(w.Write(4 * 4096, p + 4 * 4096, kSize - 4 * 4096).ok());  // tail first
      ASSERT_TRUE(w.Write(4096, p + 4096, 2 * 4096).ok());
      ASSERT_TRUE(w.Write(3 * 4096, p + 3 * 4096, 100).ok());  // unaligned end
      ASSERT_TRUE(w.Write(3 * 4096 + 100, p + 3 * 4096 + 100, 4096 - 100).ok());
      ASSERT_TRUE(w.Write(0, p, 4096).ok());
      ASSERT_TRUE(w.Finish().ok());
      if (!direct) {
        EXPECT_FALSE(w.direct());
      }
    }
    ASSERT_TRUE(f->SyncData().ok());
    ASSERT_TRUE(f->Close().ok());
    auto got = ReadWholeFile(path);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->size(), kSize);
    EXPECT_EQ(std::memcmp(got->data(), buf.get(), kSize), 0) << "direct " << direct;
  }
}

// A failing write is reported by Finish (and by later Writes), naming the file.
TEST(ChunkedFileWriterTest, ErrorsAreReported) {
  const std::string dir = TempDir();
  const std::string path = JoinPath(dir, "ro");
  ASSERT_TRUE(File::Create(path)->Close().ok());
  auto ro = File::OpenRead(path);  // writes fail with EBADF
  ASSERT_TRUE(ro.ok());
  ChunkedFileWriter w(*ro, 2, /*try_direct=*/false);
  const char data[10] = {};
  ASSERT_TRUE(w.Write(0, data, sizeof(data)).ok());
  const Status st = w.Finish();
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
  EXPECT_FALSE(w.Write(10, data, sizeof(data)).ok());
}

}  // namespace
}  // namespace flashkv
