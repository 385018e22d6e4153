#include "gguf/gguf_file.h"

#include <cmath>

#include <gtest/gtest.h>

#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace flashkv {
namespace {

using testing::RawBuilder;

// Parses bytes that must fail; returns the message and checks it contains `needle`.
void ExpectCorrupt(const std::vector<uint8_t>& bytes, const std::string& needle) {
  auto f = GgufFile::FromBytes(bytes);
  ASSERT_FALSE(f.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(f.status().message().find(needle), std::string::npos)
      << "message: " << f.status().ToString() << "\nexpected to contain: " << needle;
}

TEST(GgufFileTest, ReadsDs4TinyFixture) {
  auto f = GgufFile::Open(testing::Ds4TinyPath());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->tensors().size(), 150u);
  EXPECT_EQ(f->keys().size(), 47u);
  EXPECT_EQ(f->keys()[0], "general.architecture");
  EXPECT_EQ(*f->GetString("general.architecture"), "deepseek4");
  EXPECT_EQ(*f->GetU64("deepseek4.block_count"), 5u);
  EXPECT_EQ(*f->TypeOf("deepseek4.block_count"), GgufType::kU32);
  EXPECT_EQ(*f->GetU64("deepseek4.embedding_length"), 256u);
  EXPECT_EQ(*f->GetU64("deepseek4.rope.scaling.original_context_length"), 65536u);
  EXPECT_EQ(*f->GetF64("deepseek4.rope.scaling.factor"), 16.0);
  EXPECT_EQ(*f->GetF64("deepseek4.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-6f));
  EXPECT_EQ(*f->GetBool("deepseek4.expert_weights_norm"), true);
  EXPECT_EQ(*f->GetIntArray("deepseek4.attention.compress_ratios"),
            (std::vector<int64_t>{0, 0, 4, 128, 4}));
  EXPECT_EQ(f->ArrayInfo("deepseek4.attention.compress_ratios")->elem_type, GgufType::kU32);
  EXPECT_EQ(*f->GetFloatArray("deepseek4.swiglu_clamp_exp"), (std::vector<double>(5, 10.0)));

  auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 1024u);
  EXPECT_EQ((*tokens)[0], "<｜begin▁of▁sentence｜>");
  EXPECT_EQ((*tokens)[3], "!");
  EXPECT_EQ((*tokens)[1023], "｜DSML｜");
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.merges")->size(), 760u);
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.merges")->front(), "Ġ t");
  auto types = f->GetIntArray("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  EXPECT_EQ(f->ArrayInfo("tokenizer.ggml.token_type")->elem_type, GgufType::kI32);
  EXPECT_EQ((*types)[0], 3);
  EXPECT_EQ((*types)[3], 1);

  const GgufTensorInfo* gate = f->FindTensor("blk.0.ffn_gate_exps.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->type, DType::kIQ2_XXS);
  EXPECT_EQ(gate->ne, (std::vector<uint64_t>{256, 256, 8}));
  EXPECT_EQ(gate->nbytes, 256u * 8 * 66);
  EXPECT_EQ(gate->offset, 908832u);

  // The data section starts at the aligned end of the tensor infos (byte 37468 -> 37472).
  EXPECT_EQ(f->data_offset(), 37472u);
  const GgufTensorInfo& first = f->tensors().front();
  EXPECT_EQ(first.name, "token_embd.weight");
  EXPECT_EQ(first.type, DType::kF16);
  EXPECT_EQ(first.ne, (std::vector<uint64_t>{256, 1024}));
  const GgufTensorInfo& last = f->tensors().back();
  EXPECT_EQ(last.name, "output.weight");
  EXPECT_EQ(last.type, DType::kQ8_0);
  EXPECT_EQ(f->data_offset() + last.offset + last.nbytes, f->file_size());
  EXPECT_EQ(f->FindTensor("blk.0.ffn_gate_tid2eid.weight")->type, DType::kI32);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_gate_tid2eid.weight")->ne, (std::vector<uint64_t>{2, 1024}));
  EXPECT_EQ(f->FindTensor("blk.3.exp_probs_b.bias")->ne, (std::vector<uint64_t>{8}));
}

TEST(GgufFileTest, MissingFileIsAnIoErrorNamingThePath) {
  auto f = GgufFile::Open("/nonexistent/dir/x.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kIoError);
  EXPECT_NE(f.status().message().find("/nonexistent/dir/x.gguf"), std::string::npos);
}

TEST(GgufFileTest, RejectsBadMagicAndVersion) {
  RawBuilder b;
  b.Raw("GGML", 4).U32(3).U64(0).U64(0);
  ExpectCorrupt(b.bytes, "not a GGUF file");
  RawBuilder v2;
  v2.Header(0, 0, 2);
  auto f = GgufFile::FromBytes(v2.bytes);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(f.status().message().find("version 2"), std::string::npos);
  ExpectCorrupt({'G', 'G'}, "truncated: magic");
  ExpectCorrupt({}, "truncated: magic");
}

TEST(GgufFileTest, EmptyFileWithHeaderOnlyParses) {
  RawBuilder b;
  b.Header(0, 0);
  auto f = GgufFile::FromBytes(b.bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->keys().empty());
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufFileTest, RejectsAbsurdCounts) {
  RawBuilder b;
  b.Header(1ull << 60, 3);
  ExpectCorrupt(b.bytes, "cannot fit");
  RawBuilder c;
  c.Header(0, 1ull << 40).Str("k").U32(4).U32(1);
  ExpectCorrupt(c.bytes, "cannot fit");
}

TEST(GgufFileTest, RejectsBadMetadata) {
  {
    RawBuilder b;  // string longer than the file
    b.Header(0, 1).Str("k").U32(8).U64(1000).Raw("abc", 3);
    ExpectCorrupt(b.bytes, "length 1000 is longer than the 3 bytes left");
  }
  {
    RawBuilder b;
    b.Header(0, 1).Str("k").U32(13).U32(0);
    ExpectCorrupt(b.bytes, "unknown value type 13");
  }
  {
    RawBuilder b;
    b.Header(0, 1).Str("k").U32(9).U32(99).U64(0);
    ExpectCorrupt(b.bytes, "unknown array element type 99");
  }
  {
    RawBuilder b;  // array count larger than the file could hold
    b.Header(0, 1).Str("k").U32(9).U32(4).U64(1ull << 61).U32(0);
    ExpectCorrupt(b.bytes, "cannot fit");
  }
  {
    RawBuilder b;  // arrays nested four deep
    b.Header(0, 1).Str("k");
    b.U32(9);
    for (int i = 0; i < 4; ++i) b.U32(9).U64(1);
    b.U32(4).U64(1).U32(7);
    ExpectCorrupt(b.bytes, "nested deeper");
  }
  {
    RawBuilder b;
    b.Header(0, 2).Str("k").U32(4).U32(1).Str("k").U32(4).U32(2);
    ExpectCorrupt(b.bytes, "duplicate metadata key 'k'");
  }
  {
    RawBuilder b;
    b.Header(0, 1).Str("").U32(4).U32(1);
    ExpectCorrupt(b.bytes, "empty key");
  }
  {
    RawBuilder b;
    b.Header(0, 1).Str("general.alignment").U32(4).U32(48);
    ExpectCorrupt(b.bytes, "general.alignment 48 is not a power of two");
  }
  {
    RawBuilder b;
    b.Header(0, 1).Str("general.alignment").U32(8).Str("32");
    ExpectCorrupt(b.bytes, "expected an integer");
  }
}

// A file with one metadata key and the given tensor infos, followed by `data_bytes` bytes.
std::vector<uint8_t> WithTensors(
    const std::vector<std::tuple<std::string, std::vector<uint64_t>, uint32_t, uint64_t>>& infos,
    size_t data_bytes) {
  RawBuilder b;
  b.Header(infos.size(), 1).Str("general.alignment").U32(4).U32(32);
  for (const auto& [name, ne, type, off] : infos) b.TensorInfo(name, ne, type, off);
  b.PadTo(32);
  b.bytes.resize(b.bytes.size() + data_bytes, 0xAB);
  return b.bytes;
}

TEST(GgufFileTest, RejectsBadTensorInfos) {
  ExpectCorrupt(WithTensors({{"t", {}, 0, 0}}, 64), "n_dims 0 is outside 1..4");
  ExpectCorrupt(WithTensors({{"t", {1, 1, 1, 1, 1}, 0, 0}}, 64), "n_dims 5 is outside 1..4");
  ExpectCorrupt(WithTensors({{"t", {4}, 77, 0}}, 64), "tensor 't': unknown tensor type id 77");
  ExpectCorrupt(WithTensors({{"t", {0}, 0, 0}}, 64), "dimension 0 is 0");
  ExpectCorrupt(WithTensors({{"t", {1ull << 40, 1ull << 40}, 0, 0}}, 64), "overflows");
  ExpectCorrupt(WithTensors({{"t", {33}, 8, 0}}, 64), "tensor 't'");  // not whole Q8_0 blocks
  ExpectCorrupt(WithTensors({{"t", {4}, 0, 0}, {"t", {4}, 0, 32}}, 64),
                "duplicate tensor name 't'");
  ExpectCorrupt(WithTensors({{"t", {4}, 0, 16}}, 64),
                "tensor 't': data offset 16 is not a multiple of the alignment 32");
  ExpectCorrupt(WithTensors({{"t", {16}, 0, 32}}, 64), "tensor 't': data [");
  ExpectCorrupt(WithTensors({{"t", {16}, 0, 32}}, 64), "past end of file (size ");
  ExpectCorrupt(WithTensors({{"a", {16}, 0, 0}, {"b", {4}, 0, 32}}, 64),
                "tensor 'b': data at offset 32 overlaps tensor 'a' ([0, 64))");
  ExpectCorrupt(WithTensors({{"", {4}, 0, 0}}, 64), "empty name");

  auto ok = GgufFile::FromBytes(WithTensors({{"a", {16}, 0, 0}, {"b", {4}, 0, 64}}, 80));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->FindTensor("b")->data[0], 0xAB);
}

TEST(GgufFileTest, DataSectionPastEndIsAnError) {
  RawBuilder b;
  b.Header(1, 0).TensorInfo("t", {4}, 0, 0);  // no padding, no data
  ExpectCorrupt(b.bytes, "data section would start at offset");
}

TEST(GgufFileTest, MovedFileKeepsTensorPointersValid) {
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("t", DType::kF32, {1}, {1, 2, 3, 4}).ok());
  auto f = GgufFile::FromBytes(*w.WriteToBytes());
  ASSERT_TRUE(f.ok());
  GgufFile moved = std::move(f).value();
  GgufFile again = std::move(moved);
  EXPECT_EQ(again.FindTensor("t")->data[3], 4);
}

}  // namespace
}  // namespace flashkv
