#include "convert/safetensors_file.h"

#include <cmath>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "convert/safetensors_checkpoint.h"
#include "safetensors_builder.h"

namespace flashkv {
namespace {

using testing::SafetensorsBuilder;

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

std::vector<uint8_t> U16s(std::initializer_list<uint16_t> v) {
  std::vector<uint8_t> b(v.size() * 2);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

void ExpectError(const std::vector<uint8_t>& bytes, const std::string& needle) {
  auto f = SafetensorsFile::FromBytes(bytes);
  ASSERT_FALSE(f.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(f.status().message().find(needle), std::string::npos)
      << f.status().ToString() << "\nexpected: " << needle;
}

TEST(SafetensorsFileTest, ReadsHfTinyFixture) {
  auto f = SafetensorsFile::Open(testing::HfTinyDir() + "/model.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->tensors().size(), 259u);
  EXPECT_EQ(f->metadata().at("format"), "pt");

  const SafetensorsTensor* head = f->Find("head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->dtype, StDType::kF32);
  EXPECT_EQ(head->shape, (std::vector<uint64_t>{512, 64}));
  EXPECT_EQ(head->nbytes, 512u * 64 * 4);
  auto values = head->ToF32();
  ASSERT_TRUE(values.ok());
  auto view = head->View<float>();
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_EQ(view->size(), values->size());
  EXPECT_TRUE(std::equal(view->begin(), view->end(), values->begin()));
  EXPECT_FALSE(head->View<int64_t>().ok());
  EXPECT_FALSE(head->ToI64().ok());

  const SafetensorsTensor* tid = f->Find("model.layers.0.ffn.gate.tid2eid");
  ASSERT_NE(tid, nullptr);
  EXPECT_EQ(tid->dtype, StDType::kI64);
  EXPECT_EQ(tid->shape, (std::vector<uint64_t>{512, 2}));
  auto ids = tid->ToI64();
  ASSERT_TRUE(ids.ok());
  for (int64_t e : *ids) {
    EXPECT_GE(e, 0);
    EXPECT_LT(e, 8);
  }
  EXPECT_FALSE(tid->ToF32().ok());
  EXPECT_NE(f->Find("model.layers.0.attn.norm.weight"), nullptr);
  EXPECT_EQ(f->Find("model.layers.0.attn.kv_norm.weight"), nullptr);
}

TEST(SafetensorsFileTest, ConvertsEveryDtypeExactly) {
  SafetensorsBuilder b;
  b.Add("f16", "F16", {4}, U16s({0x3C00, 0xC000, 0x0001, 0x7C00}));  // 1, -2, 2^-24, inf
  b.Add("bf16", "BF16", {2}, U16s({0x3F80, 0xC0A0}));                // 1, -5
  // E4M3: 1.0, 448 (largest), 2^-9 (smallest subnormal), -1.5, NaN.
  b.Add("e4m3", "F8_E4M3", {5}, {0x38, 0x7E, 0x01, 0xBC, 0x7F});
  b.Add("e8m0", "F8_E8M0", {3}, {127, 130, 0});  // 1, 8, 2^-127
  std::vector<uint8_t> i32(8);
  int32_t iv[2] = {-7, 123456};
  std::memcpy(i32.data(), iv, 8);
  b.Add("i32", "I32", {2}, i32);
  b.AddI64("i64", {1, 2}, {-1, 1ll << 40});
  auto f = SafetensorsFile::FromBytes(b.Build());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*f->Find("f16")->ToF32(),
            (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), INFINITY}));
  EXPECT_EQ(*f->Find("bf16")->ToF32(), (std::vector<float>{1.0f, -5.0f}));
  auto e4 = *f->Find("e4m3")->ToF32();
  EXPECT_EQ(e4[0], 1.0f);
  EXPECT_EQ(e4[1], 448.0f);
  EXPECT_EQ(e4[2], std::ldexp(1.0f, -9));
  EXPECT_EQ(e4[3], -1.5f);
  EXPECT_TRUE(std::isnan(e4[4]));
  EXPECT_EQ(*f->Find("e8m0")->ToF32(), (std::vector<float>{1.0f, 8.0f, std::ldexp(1.0f, -127)}));
  EXPECT_EQ(*f->Find("i32")->ToI64(), (std::vector<int64_t>{-7, 123456}));
  EXPECT_EQ(*f->Find("i64")->ToI64(), (std::vector<int64_t>{-1, 1ll << 40}));
  EXPECT_EQ(f->Find("i64")->shape, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(StDTypeName(f->Find("e4m3")->dtype), "F8_E4M3");
}

TEST(SafetensorsFileTest, ZeroSizedTensorsAndEmptyHeaderParse) {
  SafetensorsBuilder b;
  b.AddF32("empty", {0, 4}, {});
  b.AddF32("x", {1}, {2.5f});
  auto f = SafetensorsFile::FromBytes(b.Build());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->Find("empty")->numel(), 0u);
  EXPECT_TRUE(f->Find("empty")->ToF32()->empty());
  EXPECT_EQ(f->Find("x")->ToF32()->at(0), 2.5f);
  auto none = SafetensorsFile::FromBytes(SafetensorsBuilder().Build());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tensors().empty());
}

// Header bytes with the given JSON text and `data` bytes of payload.
std::vector<uint8_t> Raw(const std::string& json, size_t data = 0) {
  uint64_t n = json.size();
  std::vector<uint8_t> out(8 + n + data, 0);
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, json.data(), n);
  return out;
}

TEST(SafetensorsFileTest, RejectsMalformedFiles) {
  ExpectError({1, 2, 3}, "too short");
  ExpectError({200, 0, 0, 0, 0, 0, 0, 0, '{', '}'}, "header length 200 runs past the end");
  ExpectError(Raw("{\"a\": "), "does not parse");
  ExpectError(Raw("[1, 2]"), "not an object");
  ExpectError(Raw(R"({"t":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8),
              "tensor 't': dtype F64 is not supported");
  ExpectError(Raw(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
              "tensor 't': data [0, 8) past end of data section (size 4)");
  ExpectError(Raw(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
              "tensor 't': 8 data bytes, but 3 x 4 F32 needs 12");
  ExpectError(Raw(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8), "run backwards");
  ExpectError(Raw(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 8),
              "non-negative integers");
  ExpectError(Raw(R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 8),
              "non-negative integers");
  ExpectError(Raw(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 8),
              "data_offsets must be [begin, end]");
  ExpectError(Raw(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", 8), "missing or non-string dtype");
  ExpectError(Raw(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", 8), "non-array shape");
  ExpectError(Raw(R"({"t":[1]})", 8), "not an object");
  ExpectError(Raw(R"({"__metadata__":{"a":1}})"), "__metadata__ entry 'a' is not a string");
  ExpectError(
      Raw(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 8),
      "overflows");
  ExpectError(Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                      "b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  8),
              "tensor 'b': data at offset 4 overlaps tensor 'a'");
  auto missing = SafetensorsFile::Open("/nonexistent/x.safetensors");
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
}

std::vector<uint8_t> SmallFile() {
  SafetensorsBuilder b;
  b.Metadata("format", "pt");
  b.AddF32("model.layers.0.attn.wq_a.weight", {2, 3}, {1, 2, 3, 4, 5, 6});
  b.Add("model.layers.0.attn.norm.weight", "BF16", {2}, U16s({0x3F80, 0x4000}));
  b.AddI64("model.layers.0.ffn.gate.tid2eid", {2, 2}, {0, 1, 2, 3});
  b.Add("scale", "F8_E8M0", {1}, {127});
  return b.Build();
}

size_t Exercise(const SafetensorsFile& f) {
  size_t h = 0;
  for (const auto& t : f.tensors()) {
    if (auto v = t.ToF32(); v.ok())
      for (float x : *v) h += (x == x);
    if (auto v = t.ToI64(); v.ok()) h += v->size();
    if (auto v = t.View<float>(); v.ok()) h += v->size();
  }
  for (const auto& [k, v] : f.metadata()) h += k.size() + v.size();
  return h;
}

TEST(SafetensorsFuzzTest, EveryTruncationOfASmallFileFails) {
  std::vector<uint8_t> full = SmallFile();
  ASSERT_TRUE(SafetensorsFile::FromBytes(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    auto f = SafetensorsFile::FromBytes(std::vector<uint8_t>(full.begin(), full.begin() + n));
    ASSERT_FALSE(f.ok()) << "truncated at " << n << " parsed";
  }
}

TEST(SafetensorsFuzzTest, TruncatingTheFixtureFails) {
  std::vector<uint8_t> full = ReadAll(testing::HfTinyDir() + "/model.safetensors");
  ASSERT_EQ(full.size(), 2227164u);
  uint64_t header_end = 8;
  {
    uint64_t n;
    std::memcpy(&n, full.data(), 8);
    header_end += n;
  }
  std::vector<size_t> cuts;
  for (size_t n = 0; n < header_end; n += (n < 64 ? 1 : 53)) cuts.push_back(n);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 24; ++i) cuts.push_back(header_end + rng() % (full.size() - header_end));
  cuts.push_back(full.size() - 1);
  for (size_t n : cuts) {
    auto f = SafetensorsFile::FromBytes(std::vector<uint8_t>(full.begin(), full.begin() + n));
    ASSERT_FALSE(f.ok()) << "truncated at " << n << " parsed";
  }
}

TEST(SafetensorsFuzzTest, RandomByteFlipsParseOrFailCleanly) {
  std::vector<uint8_t> full = SmallFile();
  std::mt19937_64 rng(99);
  int parsed = 0, failed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bytes = full;
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      size_t at = rng() % bytes.size();
      if (rng() % 2)
        bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
      else  // JSON-significant characters make structural damage likelier
        bytes[at] = static_cast<uint8_t>("{}[]\",:0123456789 -"[rng() % 19]);
    }
    auto f = SafetensorsFile::FromBytes(std::move(bytes));
    if (f.ok()) {
      ++parsed;
      (void)Exercise(*f);
    } else {
      ++failed;
      ASSERT_FALSE(f.status().message().empty());
    }
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(failed, 100);
}

TEST(SafetensorsCheckpointTest, ShardedWithIndex) {
  testing::TempDir dir("st_index");
  SafetensorsBuilder a, b;
  a.AddF32("x", {1}, {1.0f}).AddF32("y", {2}, {2.0f, 3.0f});
  b.AddF32("z", {1}, {4.0f});
  a.WriteTo(dir.path() / "model-00001-of-00002.safetensors");
  b.WriteTo(dir.path() / "model-00002-of-00002.safetensors");
  std::ofstream(dir.path() / "model.safetensors.index.json")
      << R"({"metadata":{},"weight_map":{"x":"model-00001-of-00002.safetensors",
            "y":"model-00001-of-00002.safetensors","z":"model-00002-of-00002.safetensors"}})";
  auto ck = SafetensorsCheckpoint::Open(dir.path().string());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(ck->files().size(), 2u);
  EXPECT_EQ(ck->Find("z")->ToF32()->at(0), 4.0f);
  EXPECT_EQ(ck->Find("y")->ToF32()->at(1), 3.0f);
  EXPECT_EQ(ck->Find("w"), nullptr);

  std::ofstream(dir.path() / "model.safetensors.index.json")
      << R"({"weight_map":{"x":"model-00002-of-00002.safetensors"}})";
  auto bad = SafetensorsCheckpoint::Open(dir.path().string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos) << bad.status().ToString();
}

TEST(SafetensorsCheckpointTest, DirectoryWithoutIndexAndDuplicates) {
  testing::TempDir dir("st_noindex");
  SafetensorsBuilder().AddF32("a", {1}, {1.0f}).WriteTo(dir.path() / "1.safetensors");
  SafetensorsBuilder().AddF32("b", {1}, {2.0f}).WriteTo(dir.path() / "2.safetensors");
  auto ck = SafetensorsCheckpoint::Open(dir.path().string());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->names(), (std::vector<std::string>{"a", "b"}));
  SafetensorsBuilder().AddF32("a", {1}, {3.0f}).WriteTo(dir.path() / "3.safetensors");
  auto dup = SafetensorsCheckpoint::Open(dir.path().string());
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("tensor 'a' appears in more than one"), std::string::npos);

  testing::TempDir empty("st_empty");
  EXPECT_EQ(SafetensorsCheckpoint::Open(empty.path().string()).status().code(),
            StatusCode::kNotFound);
  auto single = SafetensorsCheckpoint::Open(testing::HfTinyDir() + "/model.safetensors");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->size(), 259u);
}

}  // namespace
}  // namespace flashkv
