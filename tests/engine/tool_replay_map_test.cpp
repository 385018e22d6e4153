#include "engine/tool_replay_map.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

const std::string kBlock =
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"ls\">\n<｜DSML｜parameter name=\"path\" "
    "string=\"true\">/tmp</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

TEST(ToolReplayMapTest, RandomIdsHaveThePrefixAnd32HexDigitsAndDiffer) {
  const std::string a = NewRandomId("call_");
  const std::string b = NewRandomId("call_");
  ASSERT_EQ(a.size(), 5u + 32u);
  EXPECT_EQ(a.substr(0, 5), "call_");
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef", 5), std::string::npos);
  EXPECT_NE(a, b);
}

TEST(ToolReplayMapTest, ResolvesOnlyWhenEveryIdMapsToTheSameBlock) {
  ToolReplayMap m;
  const std::vector<std::string> pair = {"call_1", "call_2"};
  m.Remember(pair, kBlock);
  m.Remember(std::vector<std::string>{"call_3"}, "other block");
  EXPECT_EQ(m.Resolve(pair), kBlock);
  EXPECT_EQ(m.Resolve(std::vector<std::string>{"call_2"}), kBlock);
  EXPECT_FALSE(m.Resolve(std::vector<std::string>{"call_1", "call_3"}));
  EXPECT_FALSE(m.Resolve(std::vector<std::string>{"call_1", "unknown"}));
  EXPECT_FALSE(m.Resolve(std::vector<std::string>{}));
  EXPECT_EQ(m.size(), 3u);
  // Shared blocks count once: three ids (6+6+6 bytes), two distinct blocks.
  EXPECT_EQ(m.bytes(), 18u + kBlock.size() + std::string("other block").size());
}

TEST(ToolReplayMapTest, ApplyToSetsRawDsmlOfResolvedAssistantTurns) {
  ToolReplayMap m;
  m.Remember(std::vector<std::string>{"toolu_a"}, kBlock);
  std::vector<ChatMessage> msgs(3);
  msgs[0].role = ChatRole::kUser;
  msgs[1].role = ChatRole::kAssistant;
  msgs[1].tool_calls = {{"toolu_a", "ls", "{\"path\": \"/tmp\"}"}};
  msgs[2].role = ChatRole::kAssistant;
  msgs[2].tool_calls = {{"toolu_zzz", "ls", "{}"}};
  EXPECT_EQ(m.ApplyTo(&msgs), 1);
  EXPECT_EQ(msgs[1].raw_dsml, kBlock);
  EXPECT_TRUE(msgs[2].raw_dsml.empty());
}

TEST(ToolReplayMapTest, OldestIdsGoFirstWhenFull) {
  ToolReplayMap m(/*max_ids=*/2);
  m.Remember(std::vector<std::string>{"a"}, "A");
  m.Remember(std::vector<std::string>{"b"}, "B");
  EXPECT_TRUE(m.Resolve(std::vector<std::string>{"a"}));  // a is now the most recent
  m.Remember(std::vector<std::string>{"c"}, "C");
  EXPECT_TRUE(m.Resolve(std::vector<std::string>{"a"}));
  EXPECT_FALSE(m.Resolve(std::vector<std::string>{"b"}));
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.bytes(), 4u);  // "a","c" + "A","C"

  ToolReplayMap tiny(100, /*max_bytes=*/10);
  tiny.Remember(std::vector<std::string>{"x"}, "12345678");  // 9 bytes
  tiny.Remember(std::vector<std::string>{"y"}, "abcdefgh");  // 18 > 10: x goes
  EXPECT_FALSE(tiny.Resolve(std::vector<std::string>{"x"}));
  EXPECT_TRUE(tiny.Resolve(std::vector<std::string>{"y"}));
}

TEST(ToolReplayMapTest, TrailerKeepsBlocksInTheTextAndRoundTrips) {
  ToolReplayMap m;
  m.Remember(std::vector<std::string>{"call_in1", "call_in2"}, kBlock);
  m.Remember(std::vector<std::string>{"call_out"}, "not in the text");
  const std::string text =
      "<｜User｜>list /tmp<｜Assistant｜></think>" + kBlock + "<｜end▁of▁sentence｜>";
  const std::string trailer = m.EncodeTrailer(text);
  ASSERT_GE(trailer.size(), 8u);
  EXPECT_EQ(trailer.substr(0, 3), "KTM");
  EXPECT_EQ(trailer[3], 1);
  EXPECT_EQ(uint8_t(trailer[4]), 2);  // two entries, both ids of the block in the text
  EXPECT_EQ(trailer.size(), 8u + 2 * (8 + 8 + kBlock.size()));
  EXPECT_EQ(m.EncodeTrailer("nothing here"), "");

  ToolReplayMap back;
  auto n = back.DecodeTrailer(trailer);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(back.Resolve(std::vector<std::string>{"call_in1", "call_in2"}), kBlock);
  EXPECT_FALSE(back.Resolve(std::vector<std::string>{"call_out"}));
}

TEST(ToolReplayMapTest, MalformedTrailerKeepsTheEntriesBeforeTheDamage) {
  ToolReplayMap m;
  m.Remember(std::vector<std::string>{"id_one"}, "BLOCK1");
  m.Remember(std::vector<std::string>{"id_two"}, "BLOCK2");
  std::string t = m.EncodeTrailer("BLOCK1 BLOCK2");
  ToolReplayMap back;
  auto truncated = back.DecodeTrailer(t.substr(0, t.size() - 3));
  EXPECT_EQ(truncated.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(truncated.status().message().find("entry 1"), std::string::npos);
  EXPECT_TRUE(back.Resolve(std::vector<std::string>{"id_one"}));
  EXPECT_FALSE(back.Resolve(std::vector<std::string>{"id_two"}));
  EXPECT_EQ(back.DecodeTrailer("XYZ\x01\0\0\0\0").status().code(), StatusCode::kCorrupt);
  std::string v2 = t;
  v2[3] = 2;
  EXPECT_EQ(back.DecodeTrailer(v2).status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace flashkv
