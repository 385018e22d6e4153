#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_tokenizers.h"

namespace flashkv {
namespace {

using namespace testing_tokenizers;  // NOLINT: test helpers

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(TokenizerTest, MatchesHuggingFaceOnEveryFixtureCase) {
  nlohmann::json fixture = ReadJson(std::string(FLASHKV_FIXTURES_DIR) + "/tokenizer_cases.json");
  const auto& cases = fixture["cases"];
  ASSERT_GT(cases.size(), 100u);
  size_t mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string text = cases[i]["text"];
    std::vector<int32_t> want = cases[i]["ids"];
    std::vector<int32_t> got = V3().Encode(text, /*allow_specials=*/true);
    if (got != want) {
      ++mismatches;
      ADD_FAILURE() << "case " << i << " text " << nlohmann::json(text).dump() << "\n want "
                    << nlohmann::json(want).dump() << "\n  got " << nlohmann::json(got).dump();
    }
    Expected<std::string> decoded = V3().Decode(got);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, cases[i]["decoded"].get<std::string>()) << "case " << i;
    EXPECT_EQ(*decoded, text) << "case " << i;
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(TokenizerTest, AddedV4MarkersSplitOutOnlyThoseMarkers) {
  // The fixture's "<think>reasoning</think>answer" with the V4 markers present: the markers
  // become single ids and the text between them tokenizes as it does on its own.
  std::vector<int32_t> got = Full().Encode("<think>reasoning</think>answer", true);
  EXPECT_EQ(got, (std::vector<int32_t>{128815, 86512, 288, 128816, 19995}));
  // Everything else is unchanged by the extra markers.
  EXPECT_EQ(Full().Encode("Hello world", true), (std::vector<int32_t>{19923, 2058}));

  // EncodeChatPrompt: only the seven DS4 markers are special (one test with the above:
  // loading the full vocabulary is the expensive part under ASan).

  const Tokenizer& t = Full();
  std::string text =
      "<｜begin▁of▁sentence｜>s<｜User｜>a <｜tool▁calls▁begin｜> b<｜Assistant｜></think>";
  std::vector<int32_t> ids = t.EncodeChatPrompt(text);
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(ids.back(), t.FindToken("</think>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), t.FindToken("<｜tool▁calls▁begin｜>")), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), t.FindToken("<｜User｜>")), 1);
  EXPECT_EQ(*t.Decode(ids), text);
  // Encode with all specials does take the V3 marker as one id.
  std::vector<int32_t> all = t.Encode(text, true);
  EXPECT_EQ(std::count(all.begin(), all.end(), t.FindToken("<｜tool▁calls▁begin｜>")), 1);
}

TEST(TokenizerTest, PreTokenizerPatternsAreTheOnesInTokenizerJson) {
  nlohmann::json tj = ReadJson(kTokenizerJson);
  const auto& seq = tj["pre_tokenizer"]["pretokenizers"];
  ASSERT_EQ(seq.size(), 4u);
  EXPECT_EQ(seq[0]["pattern"]["Regex"], PreTokenizer::kDigitsPattern);
  EXPECT_EQ(seq[1]["pattern"]["Regex"], PreTokenizer::kCjkPattern);
  EXPECT_EQ(seq[2]["pattern"]["Regex"], PreTokenizer::kMainPattern);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(seq[i]["behavior"], "Isolated");
    EXPECT_EQ(seq[i]["invert"], false);
  }
  EXPECT_EQ(seq[3]["type"], "ByteLevel");
  EXPECT_EQ(seq[3]["use_regex"], false);
}

TEST(TokenizerTest, SpecialsOnlyWhenAllowed) {
  const Tokenizer& t = Tiny();
  int32_t user = t.FindToken("<｜User｜>");
  int32_t think = t.FindToken("<think>");
  ASSERT_EQ(user, 1019);
  ASSERT_EQ(think, 1021);
  std::string text = "<｜User｜>hi<think>";
  std::vector<int32_t> with = t.Encode(text, true);
  std::vector<int32_t> want = {user};
  for (int32_t id : t.Encode("hi", false)) want.push_back(id);
  want.push_back(think);
  EXPECT_EQ(with, want);
  std::vector<int32_t> without = t.Encode(text, false);
  EXPECT_GT(without.size(), 3u);
  for (int32_t id : without) EXPECT_FALSE(t.IsSpecial(id)) << id;
  EXPECT_EQ(*t.Decode(without), text);
  EXPECT_EQ(*t.Decode(with), text);
}

TEST(TokenizerTest, DsmlClosingTagIsSlashThenMarker) {
  // docs/TOKENIZER.md "DSML tool calls": "</｜DSML｜" tokenizes as "</" + ｜DSML｜ (+ the rest).
  const Tokenizer& t = Tiny();
  std::vector<int32_t> ids = t.Encode("</｜DSML｜invoke>", true);
  auto dsml = std::find(ids.begin(), ids.end(), t.FindToken("｜DSML｜"));
  ASSERT_NE(dsml, ids.end());
  EXPECT_EQ(*t.Decode(std::span(ids.data(), dsml - ids.begin())), "</");
  EXPECT_EQ(*t.Decode(ids), "</｜DSML｜invoke>");
}

TEST(TokenizerTest, InvalidUtf8RoundTripsBytewise) {
  const Tokenizer& t = Tiny();
  const std::string inputs[] = {
      std::string("abc\xff\xfe def"),
      std::string("\xe4\xbd"),             // truncated 3-byte sequence
      std::string("x\xed\xa0\x80y"),       // UTF-16 surrogate encoded in UTF-8
      std::string("\xc0\xaf overlong"),    // overlong '/'
      std::string("\x80\x80\x80 12345"),   // stray continuation bytes
      std::string("ok \xf4\x90\x80\x80"),  // above U+10FFFF
  };
  for (const std::string& in : inputs) {
    std::vector<int32_t> a = t.Encode(in, true);
    EXPECT_EQ(a, t.Encode(in, true));  // deterministic
    EXPECT_EQ(*t.Decode(a), in);
  }
  // The invalid run is its own piece: "abc" then the two bytes then " def".
  std::vector<int32_t> ids = t.Encode("abc\xff\xfe def", false);
  std::vector<int32_t> want = t.Encode("abc", false);
  want.push_back(t.FindToken("ÿ"));
  want.push_back(t.FindToken("þ"));
  for (int32_t id : t.Encode(" def", false)) want.push_back(id);
  EXPECT_EQ(ids, want);
}

TEST(TokenizerTest, DecodeRejectsOutOfRangeIds) {
  std::vector<int32_t> ids = {3, 1024};
  Expected<std::string> d = Tiny().Decode(ids);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kOutOfRange);
  ids = {-1};
  EXPECT_FALSE(Tiny().Decode(ids).ok());
  EXPECT_EQ(Tiny().TokenPiece(-5), "");
  EXPECT_EQ(Tiny().TokenPiece(3), "!");
  EXPECT_EQ(*Tiny().Decode(std::vector<int32_t>{3, 1023}), "!｜DSML｜");
}

TEST(TokenizerTest, HeapAndArrayMergeLoopsAgree) {
  // EncodePiece switches to the heap for long pieces; both must give identical ids.
  Expected<Vocab> v = LoadVocabFromGguf(Must(GgufFile::Open(kTinyGguf)));
  ASSERT_TRUE(v.ok());
  Expected<BpeModel> bpe = BpeModel::FromVocab(*v);
  ASSERT_TRUE(bpe.ok());
  const std::string words[] = {"hello",
                               " internationalization",
                               "aaaaaaaaaaaaaaaaaaaaa",
                               "        ",
                               "Ġ",
                               "\xe4\xbd\xa0\xe5\xa5\xbd",
                               ")));\n\n",
                               " antidisestablishmentarianism"};
  for (const std::string& w : words) {
    std::vector<int32_t> a, b;
    bpe->EncodePiece(w, &a);
    bpe->EncodePieceWithHeap(w, &b);
    EXPECT_EQ(a, b) << w;
  }
}

TEST(TokenizerTest, Ds4TinyGgufVocabulary) {
  const Tokenizer* t = &Tiny();
  EXPECT_EQ(t->FindToken("<｜User｜>"), 1019);
  EXPECT_EQ(t->FindToken("<｜Assistant｜>"), 1020);
  EXPECT_EQ(t->FindToken("<think>"), 1021);
  EXPECT_EQ(t->FindToken("</think>"), 1022);
  EXPECT_EQ(t->FindToken("｜DSML｜"), 1023);
  std::string prompt =
      "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What time is it in the "
      "new world?<｜Assistant｜><think>";
  std::vector<int32_t> ids = t->Encode(prompt, true);
  ASSERT_GE(ids.size(), 6u);
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(ids.back(), 1021);
  for (int32_t id : ids) EXPECT_LT(id, 1024);
  EXPECT_EQ(*t->Decode(ids), prompt);
  // The cut vocabulary is the first 1019 DeepSeek ids: " time" is id 1014 in both.
  EXPECT_EQ(t->Encode(" time", false), std::vector<int32_t>{1014});
}

TEST(TokenizerTest, LongInputsDoNotBlowUp) {
  const Tokenizer& t = Tiny();
  std::string spaces(50000, ' ');
  std::string letters(50000, 'a');
  std::string newlines(50000, '\n');
  for (const std::string* s : {&spaces, &letters, &newlines}) {
    std::vector<int32_t> ids = t.Encode(*s, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(*t.Decode(ids), *s);
  }
}

// Issue 34: a request's budget (util/work_budget.h) holds the encoder: one long word takes
// the merge loop seconds per tens of megabytes, and a budget or a stop flag ends it; with
// room to spare the ids are the unbudgeted ones.
TEST(TokenizerTest, ABudgetEndsALongEncodingAndChangesNothingElse) {
  const Tokenizer& t = Tiny();
  const std::string text = "<｜User｜>" + std::string(4 << 20, 'a') + " done";
  std::atomic<bool> stop{true};
  WorkBudget stopped(std::chrono::milliseconds(0), &stop);
  auto cut = t.EncodeChatPrompt(text, stopped);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), StatusCode::kCancelled);

  WorkBudget tiny(std::chrono::milliseconds(1), nullptr);
  auto spent = t.EncodeChatPrompt(text, tiny);
  ASSERT_FALSE(spent.ok());
  EXPECT_EQ(spent.status().code(), StatusCode::kResourceExhausted);

  const std::string small = "<｜User｜>hello there, a few words<｜Assistant｜>";
  WorkBudget ample(std::chrono::milliseconds(600000), nullptr);
  auto ids = t.EncodeChatPrompt(small, ample);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, t.EncodeChatPrompt(small));
}

// The bound ApiServer refuses huge prompts by before encoding them: no token is longer.
TEST(TokenizerTest, MaxTokenBytesBoundsEveryToken) {
  const Tokenizer& t = Tiny();
  size_t longest = 0;
  for (size_t id = 0; id < t.vocab_size(); ++id) {
    longest = std::max(longest, t.TokenBytes(int32_t(id)).size());
  }
  EXPECT_EQ(t.max_token_bytes(), longest);
  const std::string text(100000, ' ');
  EXPECT_GE(t.EncodeChatPrompt(text).size(), text.size() / t.max_token_bytes());
}

}  // namespace
}  // namespace flashkv
