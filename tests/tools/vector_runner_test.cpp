#include "tools/vector_runner.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tokenizer/vocab.h"

namespace flashkv {
namespace {

const std::string kDir = std::string(FLASHKV_SOURCE_DIR) + "/tests/data/official-vectors";

// The full DeepSeek vocabulary (tokenizer.json plus V4's chat markers), as the default
// tiny model and the real GGUFs carry it.
const Tokenizer& FullTokenizer() {
  static const Tokenizer* tok = [] {
    auto vocab = LoadVocabFromTokenizerJson(std::string(FLASHKV_SOURCE_DIR) +
                                            "/models/tokenizer/tokenizer.json");
    EXPECT_TRUE(vocab.ok()) << vocab.status().ToString();
    EXPECT_TRUE(AddMissingChatMarkers(*vocab, 129280).ok());
    auto t = Tokenizer::FromVocab(*vocab);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return new Tokenizer(std::move(*t));
  }();
  return *tok;
}

TEST(VectorRunnerTest, RendersTheOfficialTemplate) {
  auto cases = LoadVectorCases(kDir);
  ASSERT_TRUE(cases.ok());
  auto prompt = RenderVectorPrompt((*cases)[0]);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(*prompt,
            "<｜begin▁of▁sentence｜><｜User｜>Rispondi in italiano con una frase: chi era Ada "
            "Lovelace?<｜Assistant｜></think>");
}

// The official API's usage.prompt_tokens checks our chat template and tokenizer against
// DeepSeek's own server, for every case.
TEST(VectorRunnerTest, PromptCountsMatchTheOfficialApi) {
  auto cases = LoadVectorCases(kDir);
  ASSERT_TRUE(cases.ok());
  for (const VectorCase& c : *cases) {
    auto v = CheckVectorPrompt(c, FullTokenizer());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->our_prompt_tokens, c.prompt_tokens) << c.id;
    EXPECT_TRUE(v->ok()) << FormatVerdict(*v);
  }
}

TEST(VectorRunnerTest, LogSoftmaxNormalises) {
  const float logits[4] = {1.0f, 2.0f, 3.0f, -1000.0f};
  std::vector<double> lp;
  LogSoftmax(logits, 4, &lp);
  double sum = 0;
  for (double x : lp) sum += std::exp(x);
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(lp[2] - lp[1], 1.0, 1e-12);
  EXPECT_NEAR(lp[2], -std::log(1 + std::exp(-1.0) + std::exp(-2.0)), 1e-6);
}

}  // namespace
}  // namespace flashkv
