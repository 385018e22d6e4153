#include "chat/output_parser.h"

#include <random>

#include <gtest/gtest.h>

#include "chat/dsml.h"

namespace flashkv {
namespace {

using Kind = ChatEvent::Kind;

// Everything the events said, reassembled, to compare streaming with one-shot parsing.
struct Collected {
  std::string reasoning, content;
  std::vector<std::string> names, arguments;
  int invalid = 0;
  int done = 0;
  int ended = 0;
  bool operator==(const Collected&) const = default;
};

void PrintTo(const Collected& c, std::ostream* os) {
  *os << "{reasoning=" << testing::PrintToString(c.reasoning)
      << " content=" << testing::PrintToString(c.content)
      << " names=" << testing::PrintToString(c.names)
      << " args=" << testing::PrintToString(c.arguments) << " invalid=" << c.invalid
      << " ended=" << c.ended << " done=" << c.done << "}";
}

void Collect(const std::vector<ChatEvent>& events, Collected* c) {
  for (const ChatEvent& e : events) {
    switch (e.kind) {
      case Kind::kReasoning:
        c->reasoning += e.text;
        break;
      case Kind::kContent:
        c->content += e.text;
        break;
      case Kind::kToolCallBegin:
        ASSERT_EQ(e.call_index, static_cast<int>(c->names.size()));
        c->names.push_back(e.text);
        c->arguments.emplace_back();
        break;
      case Kind::kToolCallArguments:
        ASSERT_GE(e.call_index, 0);
        ASSERT_LT(e.call_index, static_cast<int>(c->arguments.size()));
        c->arguments[e.call_index] += e.text;
        break;
      case Kind::kToolCallEnd:
        ++c->ended;
        break;
      case Kind::kToolCallsInvalid:
        ++c->invalid;
        c->names.clear();
        c->arguments.clear();
        c->ended = 0;
        break;
      case Kind::kDone:
        ++c->done;
        break;
    }
  }
}

// Feeds `text` in pieces cut at `cuts` (byte offsets), returns events and the parser.
Collected RunParser(std::string_view text, const std::vector<size_t>& cuts, bool thinking,
                    bool tools, ParsedOutput* result = nullptr, bool* stop = nullptr) {
  OutputParser parser(thinking, tools);
  Collected c;
  size_t prev = 0;
  for (size_t cut : cuts) {
    Collect(parser.Feed(text.substr(prev, cut - prev)), &c);
    prev = cut;
  }
  Collect(parser.Feed(text.substr(prev)), &c);
  if (stop) *stop = parser.ShouldStop();
  Collect(parser.Finish(), &c);
  if (result) *result = parser.result();
  return c;
}

Collected OneShot(std::string_view text, bool thinking, bool tools, ParsedOutput* r = nullptr) {
  return RunParser(text, {}, thinking, tools, r);
}

// Every split into two pieces and every byte fed alone must give the same result.
void ExpectSplitInvariant(std::string_view text, bool thinking, bool tools) {
  ParsedOutput want_result;
  Collected want = OneShot(text, thinking, tools, &want_result);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ParsedOutput r;
    EXPECT_EQ(RunParser(text, {cut}, thinking, tools, &r), want) << "cut at " << cut;
    EXPECT_EQ(r.content, want_result.content);
    EXPECT_EQ(r.raw_dsml, want_result.raw_dsml);
  }
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  EXPECT_EQ(RunParser(text, every, thinking, tools), want) << "byte by byte";
}

const std::string kBlock =
    "\n\n<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"get_weather\">\n"
    "<｜DSML｜parameter name=\"city\" string=\"true\">Paris &amp; Lyon</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"days\" string=\"false\">[1, 2]</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"now\">\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>";

TEST(OutputParserTest, ReasoningThenContent) {
  ParsedOutput r;
  Collected c = OneShot("Let me think.</think>The answer is 4.", true, false, &r);
  EXPECT_EQ(c.reasoning, "Let me think.");
  EXPECT_EQ(c.content, "The answer is 4.");
  EXPECT_EQ(r.reasoning, "Let me think.");
  EXPECT_EQ(r.content, "The answer is 4.");
  EXPECT_EQ(c.done, 1);
  // A repeated leading <think> is not reasoning text.
  EXPECT_EQ(OneShot("<think>hm</think>ok", true, false).reasoning, "hm");
  ExpectSplitInvariant("<think>hm</think>ok", true, false);
  ExpectSplitInvariant("a</thin</think>b</think>c", true, false);
}

TEST(OutputParserTest, WithoutThinkCloseEverythingIsReasoningAndDsmlIsInert) {
  ParsedOutput r;
  Collected c = OneShot("thinking about" + kBlock, true, true, &r);
  EXPECT_EQ(c.reasoning, "thinking about" + kBlock);
  EXPECT_EQ(c.content, "");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_FALSE(r.unterminated_tool_block);
}

TEST(OutputParserTest, NonThinkingOutputIsContent) {
  Collected c = OneShot("Hello </think> world", false, false);
  EXPECT_EQ(c.content, "Hello </think> world");
  EXPECT_EQ(c.reasoning, "");
}

TEST(OutputParserTest, ParsesToolCallsAndStops) {
  std::string text = "why</think>Checking the weather.  " + kBlock;
  ParsedOutput r;
  bool stop = false;
  Collected c = RunParser(text, {}, true, true, &r, &stop);
  EXPECT_TRUE(stop);
  EXPECT_EQ(c.reasoning, "why");
  EXPECT_EQ(c.content, "Checking the weather.");  // trailing whitespace trimmed
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Paris & Lyon","days":[1,2]})");
  EXPECT_EQ(r.tool_calls[1].name, "now");
  EXPECT_EQ(r.tool_calls[1].arguments, "{}");
  EXPECT_EQ(c.names, (std::vector<std::string>{"get_weather", "now"}));
  EXPECT_EQ(c.arguments[0], r.tool_calls[0].arguments);
  EXPECT_EQ(c.ended, 2);
  EXPECT_EQ(r.raw_dsml, kBlock);
  EXPECT_TRUE(r.tool_block_complete);
  EXPECT_FALSE(r.dsml_error);
  ExpectSplitInvariant(text, true, true);
}

TEST(OutputParserTest, NoStopWhenToolsInactive) {
  bool stop = true;
  ParsedOutput r;
  RunParser("x" + kBlock, {}, false, false, &r, &stop);
  EXPECT_FALSE(stop);
  EXPECT_EQ(r.tool_calls.size(), 2u);  // parsing still runs (docs/TOKENIZER.md "Output parsing")
}

TEST(OutputParserTest, RoundTripsCanonicalRendering) {
  std::vector<ToolCall> calls = {
      {"1", "write", R"({"path":"a.txt","text":"x </｜DSML｜parameter> && y > z\n","n":-1.5})"},
      {"2", "ls", R"({"opts":{"all":true,"depth":[1,null]}})"},
      {"3", "odd", "[1,2]"}};
  ParsedOutput r;
  OneShot(RenderDsmlToolCalls(calls), false, true, &r);
  ASSERT_EQ(r.tool_calls.size(), 3u);
  EXPECT_EQ(r.tool_calls[0].arguments,
            R"({"path":"a.txt","text":"x </｜DSML｜parameter> && y > z\n","n":-1.5})");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"opts":{"all":true,"depth":[1,null]}})");
  EXPECT_EQ(r.tool_calls[2].arguments, R"({"arguments":"[1,2]"})");
  EXPECT_EQ(r.raw_dsml, RenderDsmlToolCalls(calls));
  ExpectSplitInvariant(RenderDsmlToolCalls(calls), false, true);
}

TEST(OutputParserTest, RecognisesDriftedVariants) {
  for (std::string p : {"DSML｜", ""}) {
    std::string text = "ok <" + p + "tool_calls>\n<" + p + "invoke name=\"f\">\n<" + p +
                       "parameter name=\"k\">v &lt;3</" + p + "parameter>\n</" + p + "invoke>\n</" +
                       p + "tool_calls>";
    ParsedOutput r;
    OneShot(text, false, true, &r);
    ASSERT_EQ(r.tool_calls.size(), 1u) << p;
    EXPECT_EQ(r.tool_calls[0].name, "f");
    // No string attribute: treated as a string, entities decoded.
    EXPECT_EQ(r.tool_calls[0].arguments, R"({"k":"v <3"})");
    EXPECT_EQ(r.content, "ok");
    EXPECT_EQ(r.raw_dsml, text.substr(3));
    ExpectSplitInvariant(text, false, true);
  }
}

TEST(OutputParserTest, LooseXmlBecomesNestedObject) {
  std::string text =
      "<｜DSML｜tool_calls><｜DSML｜invoke name=\"f\">"
      "<｜DSML｜parameter name=\"opts\">\n"
      "  <｜DSML｜parameter name=\"a\" string=\"false\">1</｜DSML｜parameter>\n"
      "  <｜DSML｜parameter name=\"b\">x</｜DSML｜parameter>\n"
      "</｜DSML｜parameter>"
      "<｜DSML｜parameter name=\"bad\" string=\"false\">{not json</｜DSML｜parameter>"
      "</｜DSML｜invoke></｜DSML｜tool_calls>";
  ParsedOutput r;
  OneShot(text, false, true, &r);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"opts":{"a":1,"b":"x"},"bad":"{not json"})");
  ExpectSplitInvariant(text, false, true);
}

TEST(OutputParserTest, MalformedBlocksBecomeContent) {
  const std::string cases[] = {
      // text between elements
      "see <｜DSML｜tool_calls>\nhello\n</｜DSML｜tool_calls> after",
      // parameter outside an invoke
      "<｜DSML｜tool_calls><｜DSML｜parameter name=\"a\">1</｜DSML｜parameter>",
      // invoke without a name
      "<｜DSML｜tool_calls><｜DSML｜invoke>\n</｜DSML｜invoke></｜DSML｜tool_calls>",
      // block closed inside an invoke
      "<｜DSML｜tool_calls><｜DSML｜invoke name=\"f\"></｜DSML｜tool_calls>",
      // wrong variant inside the block
      "<tool_calls><｜DSML｜invoke name=\"f\"></｜DSML｜invoke></tool_calls>",
  };
  for (const std::string& text : cases) {
    ParsedOutput r;
    Collected c = OneShot(text, false, true, &r);
    EXPECT_TRUE(r.dsml_error) << text;
    EXPECT_TRUE(r.tool_calls.empty()) << text;
    EXPECT_EQ(c.invalid, 1) << text;
    EXPECT_TRUE(c.names.empty());
    // Nothing is lost: the whole output comes back as content.
    EXPECT_EQ(r.content, text) << text;
    EXPECT_EQ(c.content, text) << text;
    ExpectSplitInvariant(text, false, true);
  }
}

TEST(OutputParserTest, GoodCallsThenMalformedAreAllDropped) {
  std::string text = "<｜DSML｜tool_calls><｜DSML｜invoke name=\"f\"></｜DSML｜invoke>oops";
  ParsedOutput r;
  Collected c = OneShot(text, false, true, &r);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(c.invalid, 1);
  EXPECT_EQ(r.content, text);
}

TEST(OutputParserTest, UnterminatedBlockIsReported) {
  std::string text = "x\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n";
  ParsedOutput r;
  bool stop = true;
  Collected c = RunParser(text, {}, false, true, &r, &stop);
  EXPECT_FALSE(stop);
  EXPECT_TRUE(r.unterminated_tool_block);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, text);
  EXPECT_EQ(c.names, std::vector<std::string>{});
}

TEST(OutputParserTest, EndMarkerWithoutStartIsText) {
  std::string text = "done </｜DSML｜tool_calls> really";
  ParsedOutput r;
  OneShot(text, false, true, &r);
  EXPECT_EQ(r.content, text);
  EXPECT_FALSE(r.dsml_error);
  ExpectSplitInvariant(text, false, true);
}

TEST(OutputParserTest, OverlongTagIsAbandonedTheSameWayInAnySplit) {
  std::string text = "<｜DSML｜tool_calls><｜DSML｜invoke name=\"" + std::string(5000, 'a') + "\">";
  ParsedOutput r;
  Collected one = OneShot(text, false, true, &r);
  EXPECT_TRUE(r.dsml_error);
  EXPECT_EQ(r.content, text);
  std::vector<size_t> cuts;
  for (size_t i = 7; i < text.size(); i += 7) cuts.push_back(i);
  EXPECT_EQ(RunParser(text, cuts, false, true), one);
}

TEST(OutputParserTest, LargeParameterStreamsInLinearTime) {
  // A 1 MB file body fed 3 bytes at a time: the closing-tag search resumes where it
  // stopped, so this takes milliseconds, not a quadratic rescan.
  std::string body(1 << 20, 'x');
  std::string text =
      "<｜DSML｜tool_calls><｜DSML｜invoke name=\"write\">"
      "<｜DSML｜parameter name=\"text\" string=\"true\">" +
      body + "</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜tool_calls>";
  OutputParser parser(false, true);
  for (size_t i = 0; i < text.size(); i += 3) parser.Feed(std::string_view(text).substr(i, 3));
  EXPECT_TRUE(parser.ShouldStop());
  ASSERT_EQ(parser.result().tool_calls.size(), 1u);
  EXPECT_EQ(parser.result().tool_calls[0].arguments, "{\"text\":\"" + body + "\"}");
}

TEST(OutputParserTest, RandomGarbageNeverCrashesAndNeverLosesText) {
  // Random mixes of marker fragments, fed in random chunks: parsing must finish, and the
  // output must be fully accounted for (reasoning + content + accepted DSML).
  const std::string atoms[] = {"<think>",
                               "</think>",
                               "<｜DSML｜tool_calls>",
                               "</｜DSML｜tool_calls>",
                               "<｜DSML｜invoke name=\"f\">",
                               "</｜DSML｜invoke>",
                               "<｜DSML｜parameter name=\"p\" string=\"true\">",
                               "<｜DSML｜parameter name=\"q\">",
                               "</｜DSML｜parameter>",
                               "<",
                               ">",
                               "\"",
                               "\n\n",
                               " ",
                               "text",
                               "｜",
                               "DSML",
                               "&amp;",
                               "<tool_calls>",
                               "\xe4\xbd",
                               "\xa0"};
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 300; ++iter) {
    std::string text;
    int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) text += atoms[rng() % std::size(atoms)];
    bool thinking = rng() % 2;
    bool tools = rng() % 2;
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i) {
      if (rng() % 3 == 0) cuts.push_back(i);
    }
    ParsedOutput a, b;
    Collected ca = RunParser(text, cuts, thinking, tools, &a);
    Collected cb = OneShot(text, thinking, tools, &b);
    ASSERT_EQ(ca, cb) << testing::PrintToString(text) << " cuts " << testing::PrintToString(cuts);
    EXPECT_EQ(ca.done, 1);
    // Every byte is reasoning, content, DSML, or a trimmed/skipped marker.
    EXPECT_LE(a.reasoning.size() + a.content.size() + a.raw_dsml.size(), text.size());
    if (!a.tool_block_complete && !thinking) {
      EXPECT_EQ(a.content, text);
    }
  }
}

}  // namespace
}  // namespace flashkv
