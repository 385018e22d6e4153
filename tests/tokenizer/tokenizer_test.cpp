#include "tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace flashkv {
namespace {

const std::string kTokenizerJson =
    std::string(FLASHKV_SOURCE_DIR) + "/models/tokenizer/tokenizer.json";

Tokenizer* Load(bool add_markers) {
  Expected<Vocab> v = LoadVocabFromTokenizerJson(kTokenizerJson);
  if (!v.ok()) throw std::runtime_error(v.status().ToString());
  if (add_markers) {
    if (Status s = AddMissingChatMarkers(*v, 129280); !s.ok()) {
      throw std::runtime_error(s.ToString());
    }
  }
  Expected<Tokenizer> t = Tokenizer::FromVocab(*v);
  if (!t.ok()) throw std::runtime_error(t.status().ToString());
  return new Tokenizer(std::move(*t));
}

// tokenizer.json exactly as HF loads it (no <think>, </think>, ｜DSML｜): the fixture's
// reference. Loaded once for all tests.
const Tokenizer& V3() {
  static const Tokenizer* tok = Load(false);
  return *tok;
}

// What flashkv runs: the same plus the V4 chat markers at 128815..128817.
const Tokenizer& Full() {
  static const Tokenizer* tok = Load(true);
  return *tok;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(TokenizerTest, MatchesHuggingFaceOnEveryFixtureCase) {
  nlohmann::json fixture =
      ReadJson(std::string(FLASHKV_SHARED_DIR) + "/fixtures/tokenizer_cases.json");
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
  const Tokenizer& t = Full();
  int32_t user = t.FindToken("<｜User｜>");
  int32_t think = t.FindToken("<think>");
  ASSERT_EQ(user, 128803);
  ASSERT_EQ(think, 128815);
  std::string text = "<｜User｜>hi<think>";
  std::vector<int32_t> with = t.Encode(text, true);
  ASSERT_EQ(with.size(), 3u);
  EXPECT_EQ(with[0], user);
  EXPECT_EQ(with[2], think);
  std::vector<int32_t> without = t.Encode(text, false);
  EXPECT_GT(without.size(), 3u);
  for (int32_t id : without) EXPECT_FALSE(t.IsSpecial(id)) << id;
  EXPECT_EQ(*t.Decode(without), text);
  EXPECT_EQ(*t.Decode(with), text);
}

TEST(TokenizerTest, DsmlClosingTagIsSlashThenMarker) {
  // Spec §4.1: "</｜DSML｜" tokenizes as "</" + ｜DSML｜.
  const Tokenizer& t = Full();
  std::vector<int32_t> ids = t.Encode("</｜DSML｜invoke>", true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(*t.Decode(std::span(ids.data(), 1)), "</");
  EXPECT_EQ(ids[1], t.FindToken("｜DSML｜"));
}

TEST(TokenizerTest, InvalidUtf8RoundTripsBytewise) {
  const Tokenizer& t = Full();
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
  EXPECT_EQ(ids, (std::vector<int32_t>{t.Encode("abc", false)[0], t.FindToken("ÿ"),
                                       t.FindToken("þ"), t.Encode(" def", false)[0]}));
}

TEST(TokenizerTest, DecodeRejectsOutOfRangeIds) {
  std::vector<int32_t> ids = {3, 129280};
  Expected<std::string> d = Full().Decode(ids);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kOutOfRange);
  ids = {-1};
  EXPECT_FALSE(Full().Decode(ids).ok());
  EXPECT_EQ(Full().TokenPiece(-5), "");
  EXPECT_EQ(Full().TokenPiece(3), "!");
}

TEST(TokenizerTest, HeapAndArrayMergeLoopsAgree) {
  // EncodePiece switches to the heap for long pieces; both must give identical ids.
  Expected<Vocab> v = LoadVocabFromTokenizerJson(kTokenizerJson);
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
  Expected<GgufFile> gguf =
      GgufFile::Open(std::string(FLASHKV_SHARED_DIR) + "/fixtures/ds4-tiny/ds4-tiny.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  Expected<Vocab> v = LoadVocabFromGguf(*gguf);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  Expected<Tokenizer> t = Tokenizer::FromVocab(*v);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
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
  // The cut vocabulary is the first 1019 DeepSeek ids, so " time" (merged in both) agrees.
  EXPECT_EQ(t->Encode(" time", false), Full().Encode(" time", false));
}

TEST(TokenizerTest, LongInputsDoNotBlowUp) {
  const Tokenizer& t = Full();
  std::string spaces(200000, ' ');
  std::string letters(200000, 'a');
  std::string newlines(100000, '\n');
  for (const std::string* s : {&spaces, &letters, &newlines}) {
    std::vector<int32_t> ids = t.Encode(*s, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(*t.Decode(ids), *s);
  }
}

}  // namespace
}  // namespace flashkv
