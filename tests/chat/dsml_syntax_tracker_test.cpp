#include "chat/dsml_syntax_tracker.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

using S = DsmlSyntaxState;

// Feeds the pieces one by one and checks the state after each.
void ExpectStates(DsmlSyntaxTracker* t, const std::vector<std::pair<std::string, S>>& script) {
  for (size_t i = 0; i < script.size(); ++i) {
    t->Feed(script[i].first);
    EXPECT_EQ(static_cast<int>(t->state()), static_cast<int>(script[i].second))
        << "after piece " << i << ": " << script[i].first;
  }
}

TEST(DsmlSyntaxTrackerTest, ScriptedToolCallFlipsAtTheRightPieces) {
  DsmlSyntaxTracker t(/*thinking=*/false);
  ExpectStates(&t, {
                       {"Let me check.", S::kOutside},
                       {"\n\n<｜DSML｜tool_calls", S::kOutside},  // marker not complete yet
                       {">", S::kStructure},
                       {"\n<｜DSML｜invoke name=\"read_file\"", S::kStructure},
                       {">\n", S::kStructure},
                       {"<｜DSML｜parameter name=\"path\" string=\"true\"", S::kStructure},
                       {">", S::kStringBody},
                       {"src/a.cc", S::kStringBody},
                       {"<b>", S::kStringBody},  // markup inside a string body is payload
                       {"</", S::kStructure},    // most likely the closing tag: greedy
                       {"｜DSML｜parameter>", S::kStructure},
                       {"\n<｜DSML｜parameter name=\"opts\" string=\"false\">", S::kJsonValue},
                       {"{\"mode\":", S::kJsonValue},
                       {" \"fa", S::kJsonString},
                       {"st \\\"", S::kJsonString},  // an escaped quote stays in the string
                       {"q\\\\", S::kJsonString},
                       {"\"", S::kJsonValue},
                       {", \"n\": 3}", S::kJsonValue},
                       {"</｜DSML｜param", S::kStructure},
                       {"eter>\n</｜DSML｜invoke>\n", S::kStructure},
                       {"</｜DSML｜tool_calls>", S::kOutside},
                   });
}

TEST(DsmlSyntaxTrackerTest, ReasoningIsNeverToolSyntax) {
  DsmlSyntaxTracker t(/*thinking=*/true);
  ExpectStates(&t, {
                       {"<think>Plan: write <｜DSML｜tool_calls>", S::kOutside},
                       {"\n<｜DSML｜invoke name=\"x\">", S::kOutside},
                       {"</thi", S::kOutside},
                       {"nk>Calling.", S::kOutside},
                       {"\n\n<｜DSML｜tool_calls>", S::kStructure},
                       {"\n<｜DSML｜invoke name=\"x\">\n<｜DSML｜parameter name=\"a\">",
                        S::kStringBody},  // no string attribute: a string, as the parser reads it
                   });
}

TEST(DsmlSyntaxTrackerTest, VariantsAndAbandonedBlocks) {
  DsmlSyntaxTracker plain(/*thinking=*/false);
  ExpectStates(&plain, {
                           {"<tool_calls>\n<invoke name=\"f\">", S::kStructure},
                           {"<parameter name=\"a\" string=\"false\">[1,", S::kJsonValue},
                           {"2]</parameter></invoke></tool_calls>", S::kOutside},
                       });
  DsmlSyntaxTracker shortv(/*thinking=*/false);
  ExpectStates(&shortv, {{"<DSML｜tool_calls><DSML｜invoke name=\"f\"><DSML｜parameter "
                          "name=\"a\" string=\"true\">v",
                          S::kStringBody}});
  // Text that is no element ends the block (the parser returns it as content); a later
  // block is tracked again.
  DsmlSyntaxTracker bad(/*thinking=*/false);
  ExpectStates(&bad, {
                         {"<｜DSML｜tool_calls>\n", S::kStructure},
                         {"<｜DSML｜inv", S::kStructure},
                         {"alid>", S::kOutside},
                         {" hello ", S::kOutside},
                         {"<｜DSML｜tool_calls>", S::kStructure},
                     });
}

// The state is a function of the text so far, however it was split.
TEST(DsmlSyntaxTrackerTest, StateDependsOnlyOnTheTextNotItsSplit) {
  const std::string text =
      "<think>r <｜DSML｜tool_calls></think>Sure.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke "
      "name=\"w\">\n<｜DSML｜parameter name=\"p\" string=\"true\">a</b> "
      "c</｜DSML｜parameter>\n<｜DSML｜parameter name=\"o\" string=\"false\">{\"k\": "
      "\"x\\\"<y>\", \"n\": [1, 2]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls> tail <tool_calls><invoke name=\"q\">";
  DsmlSyntaxTracker bytewise(/*thinking=*/true);
  int greedy = 0, payload = 0;
  for (size_t k = 1; k <= text.size(); ++k) {
    bytewise.Feed(text.substr(k - 1, 1));
    DsmlSyntaxTracker whole(/*thinking=*/true);
    whole.Feed(text.substr(0, k));
    ASSERT_EQ(static_cast<int>(bytewise.state()), static_cast<int>(whole.state())) << "at " << k;
    greedy += IsGreedySyntax(whole.state());
    payload += whole.state() == S::kStringBody || whole.state() == S::kJsonString;
  }
  EXPECT_GT(greedy, 100);
  EXPECT_GT(payload, 10);
  EXPECT_EQ(static_cast<int>(bytewise.state()), static_cast<int>(S::kStructure));
}

TEST(DsmlSyntaxTrackerTest, GreedyStatesAreStructureAndJsonPunctuation) {
  EXPECT_TRUE(IsGreedySyntax(S::kStructure));
  EXPECT_TRUE(IsGreedySyntax(S::kJsonValue));
  EXPECT_FALSE(IsGreedySyntax(S::kOutside));
  EXPECT_FALSE(IsGreedySyntax(S::kStringBody));
  EXPECT_FALSE(IsGreedySyntax(S::kJsonString));
}

}  // namespace
}  // namespace flashkv
