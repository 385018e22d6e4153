#include "tokenizer/token_id_list.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

using Ids = std::vector<int32_t>;

TEST(TokenIdListTest, AcceptsCommonSpellings) {
  EXPECT_EQ(*ParseTokenIdList("1 2 3"), (Ids{1, 2, 3}));
  EXPECT_EQ(*ParseTokenIdList("1,2,3\n"), (Ids{1, 2, 3}));
  EXPECT_EQ(*ParseTokenIdList(" [19923, 2058] "), (Ids{19923, 2058}));
  EXPECT_EQ(*ParseTokenIdList("[]"), Ids{});
  EXPECT_EQ(*ParseTokenIdList(""), Ids{});
  EXPECT_EQ(*ParseTokenIdList("-1"), (Ids{-1}));  // range is Decode's business
}

TEST(TokenIdListTest, RejectsGarbageWithOffset) {
  Expected<Ids> r = ParseTokenIdList("1 2x 3");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("byte 3"), std::string::npos) << r.status().message();
  EXPECT_FALSE(ParseTokenIdList("[1, 2").ok());
  EXPECT_FALSE(ParseTokenIdList("[1] 2").ok());
  EXPECT_FALSE(ParseTokenIdList("99999999999").ok());
}

TEST(TokenIdListTest, Formats) {
  EXPECT_EQ(FormatTokenIdList(Ids{5, 6, 7}), "5 6 7");
  EXPECT_EQ(FormatTokenIdList(Ids{}), "");
}

}  // namespace
}  // namespace flashkv
