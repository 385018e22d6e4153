#include "gguf/gguf_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf_test_util.h"

namespace flashkv {
namespace {

std::vector<uint8_t> Iota(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(start + i * 7);
  return v;
}

TEST(GgufWriterTest, RoundTripsEveryValueType) {
  GgufWriter w;
  w.SetU8("t.u8", 200);
  w.SetI8("t.i8", -100);
  w.SetU16("t.u16", 60000);
  w.SetI16("t.i16", -30000);
  w.SetU32("t.u32", 4000000000u);
  w.SetI32("t.i32", -2000000000);
  w.SetU64("t.u64", 18000000000000000000ull);
  w.SetI64("t.i64", -9000000000000000000ll);
  w.SetF32("t.f32", 1e-6f);
  w.SetF64("t.f64", 0.1);
  w.SetBool("t.bool", true);
  w.SetString("t.str", "héllo ｜DSML｜");
  w.SetString("t.empty", "");
  w.SetU8Array("a.u8", {1, 2, 255});
  w.SetI8Array("a.i8", {-128, 0, 127});
  w.SetU16Array("a.u16", {0, 65535});
  w.SetI16Array("a.i16", {-32768, 32767});
  w.SetI32Array("a.i32", {-1, 0, 1, 2147483647});
  w.SetU32Array("a.u32", {0, 0, 4, 128, 4});
  w.SetI64Array("a.i64", {std::numeric_limits<int64_t>::min(), 5});
  w.SetU64Array("a.u64", {7, 8});
  w.SetF32Array("a.f32", {10.0f, -0.5f});
  w.SetF64Array("a.f64", {1e300, -2.5});
  w.SetBoolArray("a.bool", {true, false, true});
  w.SetStringArray("a.str", {"Ġ t", "", "<｜User｜>"});
  w.SetU32Array("a.empty", {});

  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto f = GgufFile::FromBytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();

  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->keys().size(), 26u);
  EXPECT_EQ(f->keys()[0], "t.u8");
  EXPECT_EQ(f->keys()[25], "a.empty");

  EXPECT_EQ(*f->TypeOf("t.u8"), GgufType::kU8);
  EXPECT_EQ(*f->GetU64("t.u8"), 200u);
  EXPECT_EQ(*f->GetI64("t.i8"), -100);
  EXPECT_EQ(*f->GetU64("t.u16"), 60000u);
  EXPECT_EQ(*f->GetI64("t.i16"), -30000);
  EXPECT_EQ(*f->GetU64("t.u32"), 4000000000u);
  EXPECT_EQ(*f->GetI64("t.i32"), -2000000000);
  EXPECT_EQ(*f->GetU64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(*f->GetI64("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(*f->GetF64("t.f32"), static_cast<double>(1e-6f));
  EXPECT_EQ(*f->GetF64("t.f64"), 0.1);
  EXPECT_EQ(*f->GetBool("t.bool"), true);
  EXPECT_EQ(*f->GetString("t.str"), "héllo ｜DSML｜");
  EXPECT_EQ(*f->GetString("t.empty"), "");

  EXPECT_EQ(*f->GetIntArray("a.u8"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(*f->GetIntArray("a.i8"), (std::vector<int64_t>{-128, 0, 127}));
  EXPECT_EQ(*f->GetIntArray("a.u16"), (std::vector<int64_t>{0, 65535}));
  EXPECT_EQ(*f->GetIntArray("a.i16"), (std::vector<int64_t>{-32768, 32767}));
  EXPECT_EQ(*f->GetIntArray("a.i32"), (std::vector<int64_t>{-1, 0, 1, 2147483647}));
  EXPECT_EQ(*f->GetIntArray("a.u32"), (std::vector<int64_t>{0, 0, 4, 128, 4}));
  EXPECT_EQ(f->ArrayInfo("a.u32")->elem_type, GgufType::kU32);
  EXPECT_EQ(*f->GetIntArray("a.i64"),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 5}));
  EXPECT_EQ(*f->GetIntArray("a.u64"), (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(*f->GetFloatArray("a.f32"), (std::vector<double>{10.0, -0.5}));
  EXPECT_EQ(*f->GetFloatArray("a.f64"), (std::vector<double>{1e300, -2.5}));
  EXPECT_EQ(*f->GetFloatArray("a.u32"), (std::vector<double>{0, 0, 4, 128, 4}));
  EXPECT_EQ(f->ArrayInfo("a.bool")->elem_type, GgufType::kBool);
  EXPECT_EQ(f->ArrayInfo("a.bool")->count, 3u);
  EXPECT_EQ(*f->GetStringArray("a.str"), (std::vector<std::string>{"Ġ t", "", "<｜User｜>"}));
  EXPECT_TRUE(f->GetIntArray("a.empty")->empty());

  EXPECT_EQ(f->Describe("a.u32"), "array<u32>[5] [0, 0, 4, 128, 4]");
  EXPECT_EQ(f->Describe("t.bool"), "bool true");
  EXPECT_EQ(f->Describe("a.str", 2), "array<string>[3] [\"Ġ t\", \"\", ...]");
}

TEST(GgufWriterTest, GettersConvertAndRejectByType) {
  GgufWriter w;
  w.SetI32("neg", -1);
  w.SetU64("big", 18000000000000000000ull);
  w.SetU32("ratio", 16);
  w.SetString("s", "x");
  w.SetU64Array("bigarr", {18000000000000000000ull});
  auto f = GgufFile::FromBytes(*w.WriteToBytes());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->GetU64("neg").status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(f->GetI64("big").status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(*f->GetF64("ratio"), 16.0);  // ds4 accepts integer-typed floats
  EXPECT_EQ(*f->GetF64("neg"), -1.0);
  EXPECT_EQ(f->GetU64("s").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f->GetU64("s").status().message().find("'s' is string"), std::string::npos);
  EXPECT_EQ(f->GetBool("ratio").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetString("ratio").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetIntArray("s").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetIntArray("bigarr").status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(f->GetStringArray("bigarr").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetU64("missing").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(f->Has("missing"));
  EXPECT_TRUE(f->Has("s"));
}

TEST(GgufWriterTest, SettingAKeyAgainKeepsItsPosition) {
  GgufWriter w;
  w.SetU32("a", 1);
  w.SetU32("b", 2);
  w.SetString("a", "again");
  auto f = GgufFile::FromBytes(*w.WriteToBytes());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*f->GetString("a"), "again");
}

TEST(GgufWriterTest, TensorsAreAlignedAndInOrder) {
  GgufWriter w;
  w.SetString("general.architecture", "deepseek4");
  w.SetU32("general.alignment", 64);
  ASSERT_TRUE(w.AddTensor("a", DType::kF32, {3}, Iota(12)).ok());
  ASSERT_TRUE(w.AddTensor("q", DType::kQ8_0, {64, 2}, Iota(4 * 34, 3)).ok());
  ASSERT_TRUE(w.AddTensor("x", DType::kIQ2_XXS, {256, 1, 2}, Iota(2 * 66, 9)).ok());
  ASSERT_TRUE(w.AddTensorDeferred("d", DType::kI32, {2, 3}, [] {
                 return Expected<std::vector<uint8_t>>(Iota(24, 1));
               }).ok());
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(bytes->size() % 64, 0u);
  auto f = GgufFile::FromBytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  ASSERT_EQ(f->tensors().size(), 4u);
  const auto& t = f->tensors();
  EXPECT_EQ(t[0].name, "a");
  EXPECT_EQ(t[0].offset, 0u);
  EXPECT_EQ(t[0].nbytes, 12u);
  EXPECT_EQ(t[1].name, "q");
  EXPECT_EQ(t[1].type, DType::kQ8_0);
  EXPECT_EQ(t[1].offset, 64u);
  EXPECT_EQ(t[1].nbytes, 136u);
  EXPECT_EQ(t[1].ne, (std::vector<uint64_t>{64, 2}));
  EXPECT_EQ(t[2].offset, 64u + 192u);
  EXPECT_EQ(t[2].ne, (std::vector<uint64_t>{256, 1, 2}));
  EXPECT_EQ(t[3].name, "d");
  EXPECT_EQ(t[3].type, DType::kI32);
  for (const auto& [name, n, start] : std::vector<std::tuple<std::string, size_t, uint8_t>>{
           {"a", 12, 0}, {"q", 136, 3}, {"x", 132, 9}, {"d", 24, 1}}) {
    const GgufTensorInfo* ti = f->FindTensor(name);
    ASSERT_NE(ti, nullptr) << name;
    EXPECT_EQ(std::vector<uint8_t>(ti->data, ti->data + ti->nbytes), Iota(n, start)) << name;
  }
  EXPECT_EQ(f->FindTensor("nope"), nullptr);
}

TEST(GgufWriterTest, RejectsBadTensors) {
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("a", DType::kF32, {2}, Iota(8)).ok());
  Status s = w.AddTensor("a", DType::kF32, {2}, Iota(8));
  EXPECT_NE(s.message().find("duplicate tensor 'a'"), std::string::npos) << s.ToString();
  s = w.AddTensor("b", DType::kF32, {2}, Iota(7));
  EXPECT_NE(s.message().find("7 data bytes"), std::string::npos) << s.ToString();
  s = w.AddTensor("c", DType::kQ8_0, {33}, Iota(34));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor 'c'"), std::string::npos) << s.ToString();
  EXPECT_FALSE(w.AddTensor("d", DType::kF32, {}, {}).ok());
  EXPECT_FALSE(w.AddTensor("e", DType::kF32, {1, 1, 1, 1, 1}, Iota(4)).ok());
  EXPECT_FALSE(w.AddTensor("f", DType::kF32, {0}, {}).ok());
  EXPECT_FALSE(w.AddTensor("", DType::kF32, {1}, Iota(4)).ok());
  EXPECT_FALSE(w.AddTensor(std::string(64, 'n'), DType::kF32, {1}, Iota(4)).ok());
  EXPECT_EQ(w.tensor_count(), 1u);

  GgufWriter bad_align;
  bad_align.SetU32("general.alignment", 48);
  EXPECT_FALSE(bad_align.WriteToBytes().ok());

  GgufWriter bad_producer;
  ASSERT_TRUE(bad_producer
                  .AddTensorDeferred("p", DType::kF32, {4},
                                     [] { return Expected<std::vector<uint8_t>>(Iota(15)); })
                  .ok());
  auto r = bad_producer.WriteToBytes();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'p'"), std::string::npos);
}

// An empty directory under the system temp dir, unique to this process.
std::filesystem::path FreshDir(const std::string& name) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(GgufWriterTest, WritesAtomicallyToDisk) {
  const std::filesystem::path dir = FreshDir("flashkv_gguf_writer");
  std::string path = (dir / "m.gguf").string();
  GgufWriter w;
  w.SetString("general.name", "disk");
  ASSERT_TRUE(w.AddTensor("t", DType::kF16, {4}, Iota(8)).ok());
  size_t calls = 0;
  ASSERT_TRUE(w.Write(path, [&](size_t done, size_t total, const std::string& name) {
                 ++calls;
                 EXPECT_EQ(done, 1u);
                 EXPECT_EQ(total, 1u);
                 EXPECT_EQ(name, "t");
               }).ok());
  EXPECT_EQ(calls, 1u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(*f->GetString("general.name"), "disk");
  EXPECT_EQ(f->FindTensor("t")->data[7], Iota(8)[7]);
  EXPECT_EQ(w.WriteToBytes()->size(), std::filesystem::file_size(path));

  // util/file_io.h classifies ENOENT as NotFound and names the file it tried to create.
  const std::string missing = (dir / "no_such_dir" / "m.gguf").string();
  Status s = w.Write(missing);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find(missing + ".tmp"), std::string::npos) << s.ToString();
  std::filesystem::remove_all(dir);
}

// A write that fails part way leaves the previous file as it was and no temp file behind.
TEST(GgufWriterTest, FailedWriteKeepsTheOldFileAndRemovesTheTemp) {
  const std::filesystem::path dir = FreshDir("flashkv_gguf_writer_fail");
  const std::string path = (dir / "m.gguf").string();
  GgufWriter good;
  good.SetString("general.name", "old");
  ASSERT_TRUE(good.Write(path).ok());
  const uint64_t old_size = std::filesystem::file_size(path);

  GgufWriter bad;
  bad.SetString("general.name", "new");
  ASSERT_TRUE(bad.AddTensor("a", DType::kF16, {4}, Iota(8)).ok());
  ASSERT_TRUE(
      bad.AddTensorDeferred("b", DType::kF16, {4},
                            [] { return Expected<std::vector<uint8_t>>(IoError("source gone")); })
          .ok());
  Status s = bad.Write(path);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("tensor 'b'"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), old_size);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*f->GetString("general.name"), "old");
  std::filesystem::remove_all(dir);
}

// Models are ordinary output files: 0644 less the umask (the KV cache's files are 0600).
TEST(GgufWriterTest, WrittenFileHasTheUsualPermissions) {
  const std::filesystem::path dir = FreshDir("flashkv_gguf_writer_mode");
  const std::string path = (dir / "m.gguf").string();
  GgufWriter w;
  w.SetString("general.name", "mode");
  const mode_t old_mask = ::umask(022);
  Status s = w.Write(path);
  ::umask(027);
  Status s2 = w.Write(path + "2");
  ::umask(old_mask);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(::stat((path + "2").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  std::filesystem::remove_all(dir);
}

// Re-emitting every key and tensor of the ds4-tiny fixture, with the stored types, must
// reproduce the file byte for byte: the writer lays files out exactly as ds4's tools do.
TEST(GgufWriterTest, ReproducesDs4TinyByteForByte) {
  auto f = GgufFile::Open(testing::Ds4TinyPath());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  GgufWriter w;
  for (const std::string& key : f->keys()) {
    GgufType type = *f->TypeOf(key);
    switch (type) {
      case GgufType::kU32:
        w.SetU32(key, static_cast<uint32_t>(*f->GetU64(key)));
        break;
      case GgufType::kF32:
        w.SetF32(key, static_cast<float>(*f->GetF64(key)));
        break;
      case GgufType::kBool:
        w.SetBool(key, *f->GetBool(key));
        break;
      case GgufType::kString:
        w.SetString(key, *f->GetString(key));
        break;
      case GgufType::kArray: {
        GgufArrayInfo a = *f->ArrayInfo(key);
        if (a.elem_type == GgufType::kString) {
          w.SetStringArray(key, *f->GetStringArray(key));
        } else if (a.elem_type == GgufType::kU32 || a.elem_type == GgufType::kI32) {
          std::vector<int64_t> v = *f->GetIntArray(key);
          if (a.elem_type == GgufType::kU32)
            w.SetU32Array(key, std::vector<uint32_t>(v.begin(), v.end()));
          else
            w.SetI32Array(key, std::vector<int32_t>(v.begin(), v.end()));
        } else if (a.elem_type == GgufType::kF32) {
          std::vector<double> v = *f->GetFloatArray(key);
          w.SetF32Array(key, std::vector<float>(v.begin(), v.end()));
        } else {
          FAIL() << "unexpected array type in fixture: " << key;
        }
        break;
      }
      default:
        FAIL() << "unexpected type in fixture: " << key;
    }
  }
  for (const GgufTensorInfo& t : f->tensors())
    ASSERT_TRUE(
        w.AddTensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes)).ok());
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok());
  std::ifstream in(testing::Ds4TinyPath(), std::ios::binary);
  std::vector<uint8_t> orig((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes->size(), orig.size());
  EXPECT_TRUE(*bytes == orig);
}

}  // namespace
}  // namespace flashkv
