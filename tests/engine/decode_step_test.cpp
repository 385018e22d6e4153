#include "engine/decode_step.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

// A tool-call turn as the model would write it, one decoded piece per step.
const std::vector<std::string> kPieces = {"Checking",
                                          " the file",
                                          ".",
                                          "\n\n",
                                          "<｜DSML｜",
                                          "tool",
                                          "_calls",
                                          ">",
                                          "\n",
                                          "<｜DSML｜",
                                          "invoke",
                                          " name",
                                          "=\"",
                                          "read",
                                          "\">",
                                          "\n",
                                          "<｜DSML｜",
                                          "parameter",
                                          " name",
                                          "=\"",
                                          "path",
                                          "\"",
                                          " string",
                                          "=\"",
                                          "true",
                                          "\">",
                                          "src",
                                          "/main",
                                          ".cc",
                                          " and",
                                          " more",
                                          "</",
                                          "｜DSML｜",
                                          "parameter",
                                          ">",
                                          "\n",
                                          "<｜DSML｜",
                                          "parameter",
                                          " name=\"opts\"",
                                          " string=\"false\">",
                                          "{\"",
                                          "mode",
                                          " fast",
                                          "\":",
                                          " 1",
                                          "}",
                                          "</",
                                          "｜DSML｜",
                                          "parameter>",
                                          "\n</｜DSML｜invoke>",
                                          "\n</｜DSML｜tool_calls>"};

std::vector<float> RandomLogits(std::mt19937* rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> logits(64);
  for (float& l : logits) l = d(*rng);
  return logits;
}

struct Counts {
  int structure_steps = 0;
  int payload_steps = 0;
  int payload_not_argmax = 0;             // sampling really happened outside structure
  int plain_not_argmax_in_structure = 0;  // an unforced sampler would have strayed there
};

// Runs the script through an OutputStream, picking a token before each piece as the decode
// loop does, with a plain twin sampler for comparison.
Counts Drive(const GenerationRequest& req, const std::vector<std::string>& pieces) {
  OutputStream output(req);
  Sampler sampler(req.sampling);
  Sampler plain(req.sampling);
  std::mt19937 rng(99);
  Counts c;
  for (const std::string& piece : pieces) {
    const std::vector<float> logits = RandomLogits(&rng);
    const int32_t argmax = Sampler::Greedy(logits);
    const int32_t id = PickNextToken(output, sampler, logits);
    if (output.in_tool_syntax()) {
      ++c.structure_steps;
      EXPECT_EQ(id, argmax) << "before piece " << piece;
      c.plain_not_argmax_in_structure += plain.Sample(logits) != argmax;
    } else {
      ++c.payload_steps;
      c.payload_not_argmax += id != argmax;
      plain.Sample(logits);  // keep the twin's draws in step with payload draws
    }
    output.Feed(piece);
  }
  return c;
}

GenerationRequest HotRequest(bool tools_active, bool thinking) {
  GenerationRequest req;
  req.output = OutputMode::kChat;
  req.tools_active = tools_active;
  req.thinking = thinking;
  req.sampling = SamplerOptions{2.0f, 0, 1.0f, 0.0f, 1234};
  return req;
}

TEST(DecodeStepTest, InsideToolSyntaxTheHotSamplerTakesTheArgmax) {
  const Counts c = Drive(HotRequest(/*tools_active=*/true, /*thinking=*/false), kPieces);
  // Sampled: the 8 steps up to the completed start marker, the 6 of the string body
  // ("src" … "</") and the 3 inside the JSON key ("mode", " fast", "\":"); the other 34
  // are structure.
  EXPECT_EQ(c.payload_steps, 17);
  EXPECT_EQ(c.structure_steps, int(kPieces.size()) - 17);
  EXPECT_GT(c.payload_not_argmax, 0);
  EXPECT_GT(c.plain_not_argmax_in_structure, 0);
}

TEST(DecodeStepTest, ThinkingModeIsGreedyInsideToolSyntaxToo) {
  std::vector<std::string> pieces = {"<think>", "I", " should", " read", " it", ".", "</think>"};
  pieces.insert(pieces.end(), kPieces.begin(), kPieces.end());
  // The server's fixed thinking-mode sampling (temperature 1, min_p 0.05).
  GenerationRequest req = HotRequest(/*tools_active=*/true, /*thinking=*/true);
  req.sampling = SamplerOptions{1.0f, 0, 1.0f, 0.05f, 77};
  const Counts c = Drive(req, pieces);
  EXPECT_EQ(c.payload_steps, 7 + 17);
  EXPECT_EQ(c.structure_steps, int(kPieces.size()) - 17);
  EXPECT_GT(c.payload_not_argmax, 0);
}

TEST(DecodeStepTest, WithoutToolsNothingIsForced) {
  const Counts c = Drive(HotRequest(/*tools_active=*/false, /*thinking=*/false), kPieces);
  EXPECT_EQ(c.structure_steps, 0);
  EXPECT_EQ(c.payload_steps, int(kPieces.size()));
}

TEST(DecodeStepTest, StateSeenBeforeEachPiece) {
  OutputStream output(HotRequest(/*tools_active=*/true, /*thinking=*/false));
  std::vector<DsmlSyntaxState> states;
  for (const char* piece : {"Hi", "\n\n<｜DSML｜tool_calls>", "<｜DSML｜invoke name=\"f\">",
                            "<｜DSML｜parameter name=\"a\" string=\"true\">", "x",
                            "</｜DSML｜parameter>", "</｜DSML｜invoke>", "</｜DSML｜tool_calls>"}) {
    output.Feed(piece);
    states.push_back(output.syntax_state());
  }
  using S = DsmlSyntaxState;
  const std::vector<DsmlSyntaxState> want = {S::kOutside,    S::kStructure,  S::kStructure,
                                             S::kStringBody, S::kStringBody, S::kStructure,
                                             S::kStructure,  S::kOutside};
  EXPECT_EQ(states, want);
  EXPECT_TRUE(output.tool_block_closed());
}

}  // namespace
}  // namespace flashkv
