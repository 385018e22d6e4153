#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(StopMatcherTest, WithoutStopsEverythingPassesAtOnce) {
  StopMatcher m({});
  EXPECT_EQ(m.Feed("abc"), "abc");
  EXPECT_EQ(m.Flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcherTest, HoldsOnlyAPossibleStartAndCutsAtTheStop) {
  StopMatcher m({"END", ""});
  EXPECT_EQ(m.Feed("hello E"), "hello ");  // "E" may start END
  EXPECT_EQ(m.Feed("X"), "EX");            // it did not
  EXPECT_EQ(m.Feed("yes EN"), "yes ");
  EXPECT_EQ(m.Feed("D and more"), "");  // END found: text after it is dropped
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "END");
  EXPECT_EQ(m.Feed("later"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, EarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(m.Feed("hello world"), "hel");
  EXPECT_EQ(m.matched(), "lo w");
}

TEST(StopMatcherTest, FlushReleasesAHeldPrefix) {
  StopMatcher m({"</stop>"});
  EXPECT_EQ(m.Feed("a</st"), "a");
  EXPECT_EQ(m.Flush(), "</st");
}

TEST(StopMatcherTest, StopSplitAcrossManyPieces) {
  StopMatcher m({"abcd"});
  std::string out;
  for (char c : std::string("xxabcabcdzz")) out += m.Feed(std::string(1, c));
  EXPECT_EQ(out, "xxabc");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace flashkv
