// hf-tiny-a against HF transformers (fixtures/README.md): convert the checkpoint with
// `flashkv convert --type f32`, run `flashkv logits --numerics hf` with prefill chunks of 1,
// 7, 64 and the whole prompt, and require max |Δ| ≤ 1e-4 at every prompt position and at
// each of the 16 greedy decode steps, with the greedy tokens of reference.json.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "integration/fidelity_util.h"

namespace flashkv::testing {
namespace {

constexpr int kVocab = 512;
constexpr double kTolerance = 1e-4;

class HfTinyParityTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(ScratchDir("hf_tiny_a"));
    model_ = new std::string(*dir_ + "/hf-tiny-a-f32.gguf");
    const auto r = RunFlashkv("convert " + Fixture("hf-tiny-a") + " " + *model_ + " --type f32");
    ASSERT_EQ(r.exit_code, 0) << "flashkv convert failed";
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete model_;
  }
  static std::string* dir_;
  static std::string* model_;
};
std::string* HfTinyParityTest::dir_ = nullptr;
std::string* HfTinyParityTest::model_ = nullptr;

TEST_P(HfTinyParityTest, LogitsMatchTransformers) {
  const int chunk = GetParam();
  const auto ref = ReadJson(Fixture("hf-tiny-a/reference.json"));
  const std::vector<int> prompt = ref["prompt_tokens"].get<std::vector<int>>();
  const std::vector<int> greedy_ref = ref["greedy_tokens"].get<std::vector<int>>();
  ASSERT_EQ(prompt.size(), 80u);
  ASSERT_EQ(greedy_ref.size(), 16u);

  const std::string out = *dir_ + "/logits_chunk" + std::to_string(chunk) + ".f32";
  const auto r = RunFlashkv("logits --model " + *model_ + " --tokens-file " +
                            WriteTokens(*dir_, prompt) + " --decode 16 --chunk " +
                            std::to_string(chunk) + " --numerics hf --act-quant off --out " + out);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(ParseInts(r.out), greedy_ref);

  const auto got = ReadF32File(out);
  ASSERT_EQ(got.size(), 96u * kVocab);
  const RowStats prefill =
      CompareRows(got, 0, ReadF32File(Fixture("hf-tiny-a/prefill_logits.f32")), 0, 80, kVocab);
  const RowStats decode =
      CompareRows(got, 80, ReadF32File(Fixture("hf-tiny-a/decode_logits.f32")), 0, 16, kVocab);
  std::printf("hf-tiny-a chunk %d: prefill max|d| %.3g, decode max|d| %.3g\n", chunk, prefill.Max(),
              decode.Max());
  for (int p = 0; p < 80; ++p) EXPECT_LE(prefill.max_abs[p], kTolerance) << "position " << p;
  for (int s = 0; s < 16; ++s) EXPECT_LE(decode.max_abs[s], kTolerance) << "decode step " << s;
}

// 80 = the whole prompt in one chunk.
INSTANTIATE_TEST_SUITE_P(Chunks, HfTinyParityTest, ::testing::Values(1, 7, 64, 80));

}  // namespace
}  // namespace flashkv::testing
