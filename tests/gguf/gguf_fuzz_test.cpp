// Damage tests for the GGUF reader: every truncation must fail cleanly and random byte
// flips must either parse or fail cleanly. Under ASan/UBSan (make test-asan) these also
// prove the parser never reads outside the buffer.
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace flashkv {
namespace {

// A small file with every metadata type and a few tensors of different types.
std::vector<uint8_t> SmallFile() {
  GgufWriter w;
  w.SetString("general.architecture", "deepseek4");
  w.SetU32("general.alignment", 32);
  w.SetU8("u8", 1);
  w.SetI8("i8", -1);
  w.SetU16("u16", 2);
  w.SetI16("i16", -2);
  w.SetI32("i32", -3);
  w.SetU64("u64", 4);
  w.SetI64("i64", -5);
  w.SetF32("f32", 0.5f);
  w.SetF64("f64", 0.25);
  w.SetBool("bool", true);
  w.SetU32Array("ratios", {0, 0, 4, 128, 4});
  w.SetF32Array("clamp", {10, 10});
  w.SetBoolArray("bools", {true, false});
  w.SetStringArray("tokens", {"<｜begin▁of▁sentence｜>", "a", "Ġb", ""});
  std::vector<uint8_t> d(34 * 2, 0x11);
  (void)w.AddTensor("blk.0.attn_q_a.weight", DType::kQ8_0, {32, 2}, d);
  (void)w.AddTensor("blk.0.attn_norm.weight", DType::kF32, {5}, std::vector<uint8_t>(20, 0x22));
  (void)w.AddTensor("blk.0.ffn_gate_tid2eid.weight", DType::kI32, {2, 3},
                    std::vector<uint8_t>(24, 0x33));
  return *w.WriteToBytes();
}

// Touches everything a caller could reach, so ASan sees any out-of-bounds pointer.
uint64_t Exercise(const GgufFile& f) {
  uint64_t h = 0;
  for (const std::string& key : f.keys()) {
    h += f.Describe(key).size();
    if (auto v = f.GetU64(key); v.ok()) h += *v;
    if (auto v = f.GetI64(key); v.ok()) h += static_cast<uint64_t>(*v);
    if (auto v = f.GetF64(key); v.ok()) h += static_cast<uint64_t>(*v != 0);
    if (auto v = f.GetBool(key); v.ok()) h += *v;
    if (auto v = f.GetString(key); v.ok()) h += v->size();
    if (auto v = f.GetIntArray(key); v.ok()) h += v->size();
    if (auto v = f.GetFloatArray(key); v.ok()) h += v->size();
    if (auto v = f.GetStringArray(key); v.ok())
      for (const auto& s : *v) h += s.size();
  }
  for (const GgufTensorInfo& t : f.tensors())
    for (uint64_t i = 0; i < t.nbytes; ++i) h += t.data[i];
  return h;
}

uint64_t DataEnd(const GgufFile& f) {
  uint64_t end = f.data_offset();
  for (const GgufTensorInfo& t : f.tensors())
    end = std::max(end, f.data_offset() + t.offset + t.nbytes);
  return end;
}

TEST(GgufFuzzTest, EveryTruncationOfASmallFileFails) {
  std::vector<uint8_t> full = SmallFile();
  auto ok = GgufFile::FromBytes(full);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  uint64_t end = DataEnd(*ok);
  for (uint64_t n = 0; n < end; ++n) {
    auto f = GgufFile::FromBytes(std::vector<uint8_t>(full.begin(), full.begin() + n));
    ASSERT_FALSE(f.ok()) << "truncated at " << n << " of " << full.size() << " parsed";
    ASSERT_FALSE(f.status().message().empty());
  }
}

TEST(GgufFuzzTest, TruncatingTheFixtureFailsEverywhere) {
  std::ifstream in(testing::Ds4TinyPath(), std::ios::binary);
  std::vector<uint8_t> full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(full.size(), 8688256u);
  auto ok = GgufFile::FromBytes(full);
  ASSERT_TRUE(ok.ok());
  const uint64_t header_end = ok->data_offset();
  std::vector<uint64_t> cuts;
  // Every byte of the fixed header and the model metadata, and of the last tensor infos
  // and the padding; a stride through the vocabulary and the rest of the tensor directory.
  // (SmallFile above is cut at every byte; this keeps the test fast under ASan.)
  for (uint64_t n = 0; n < header_end; ++n)
    if (n < 2048 || n >= header_end - 600 || n % 11 == 0) cuts.push_back(n);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 8; ++i) cuts.push_back(header_end + rng() % (full.size() - header_end));
  cuts.push_back(full.size() - 1);
  for (uint64_t n : cuts) {
    auto f = GgufFile::FromBytes(std::vector<uint8_t>(full.begin(), full.begin() + n));
    ASSERT_FALSE(f.ok()) << "truncated at " << n << " parsed";
  }
}

TEST(GgufFuzzTest, RandomByteFlipsParseOrFailCleanly) {
  std::vector<uint8_t> full = SmallFile();
  uint64_t header_end = GgufFile::FromBytes(full)->data_offset();
  std::mt19937_64 rng(1234);
  int parsed = 0, failed = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> bytes = full;
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      // Mostly the structured region, where damage changes how the rest is read.
      uint64_t at = (rng() % 8 != 0) ? rng() % header_end : rng() % bytes.size();
      switch (rng() % 3) {
        case 0:
          bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          bytes[at] = static_cast<uint8_t>(rng());
          break;
        default:
          bytes[at] = (rng() % 2) ? 0xFF : 0x00;
          break;
      }
    }
    auto f = GgufFile::FromBytes(std::move(bytes));
    if (f.ok()) {
      ++parsed;
      (void)Exercise(*f);
    } else {
      ++failed;
      ASSERT_FALSE(f.status().message().empty());
    }
  }
  // Both outcomes must occur, or the test is not exercising anything.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(failed, 100);
}

}  // namespace
}  // namespace flashkv
