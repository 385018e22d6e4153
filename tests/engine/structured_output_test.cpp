// Structured outputs on the real (tiny) model (issue 32): with a JSON-schema constraint the
// sampled text parses and validates against its schema for every seed — the model's
// random weights pull anywhere, the mask keeps every token inside the grammar — and the
// request ends as soon as the value is complete.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "constrain/json_grammar.h"
#include "engine/engine.h"
#include "tiny_engine_util.h"

namespace flashkv {
namespace {

using json = nlohmann::ordered_json;
using testing::ChatRequest;
using testing::Msg;
using testing::RunNow;
using testing::Tiny;

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer"},
    "color": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    "note": {"type": ["string", "null"], "maxLength": 4}
  },
  "required": ["name", "age", "color"],
  "additionalProperties": false
})";

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

// kSchema, checked by hand.
void ExpectValid(const json& v, const std::string& text) {
  ASSERT_TRUE(v.is_object()) << text;
  for (const char* key : {"name", "age", "color"}) ASSERT_TRUE(v.contains(key)) << text;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    EXPECT_TRUE(k == "name" || k == "age" || k == "color" || k == "tags" || k == "note") << text;
  }
  ASSERT_TRUE(v["name"].is_string()) << text;
  EXPECT_LE(CodePoints(v["name"].get<std::string>()), 8u) << text;
  EXPECT_TRUE(v["age"].is_number_integer()) << text;
  EXPECT_TRUE(v["color"] == "red" || v["color"] == "green" || v["color"] == "blue") << text;
  if (v.contains("tags")) {
    ASSERT_TRUE(v["tags"].is_array()) << text;
    EXPECT_LE(v["tags"].size(), 3u) << text;
    for (const json& t : v["tags"]) EXPECT_TRUE(t.is_boolean()) << text;
  }
  if (v.contains("note")) {
    EXPECT_TRUE(v["note"].is_null() ||
                (v["note"].is_string() && CodePoints(v["note"].get<std::string>()) <= 4))
        << text;
  }
}

TEST(StructuredOutputTest, EverySeedsOutputValidates) {
  auto grammar = CompileJsonSchema(json::parse(kSchema));
  ASSERT_TRUE(grammar.ok()) << grammar.status().ToString();
  EngineOptions o;
  o.ctx_size = 512;
  o.live_sessions = 1;
  o.max_batch = 1;
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, o);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    GenerationRequest r = ChatRequest({Msg(ChatRole::kUser, "Describe a person as JSON.")}, 300);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.constraint = *grammar;
    auto out = RunNow(engine, r);
    ASSERT_TRUE(out.result) << out.error.ToString();
    const GenerationResult& res = *out.result;
    EXPECT_EQ(res.finish, FinishReason::kStop) << seed << ": " << res.text << " " << res.error;
    EXPECT_TRUE(res.parsed.reasoning.empty());
    json v;
    try {
      v = json::parse(res.parsed.content);
    } catch (const json::exception& e) {
      ADD_FAILURE() << seed << ": " << e.what() << "\n" << res.parsed.content;
      continue;
    }
    ExpectValid(v, res.parsed.content);
  }
}

// Without the constraint the same requests are not JSON: the test can fail.
TEST(StructuredOutputTest, WithoutTheConstraintTheModelWritesNoJson) {
  EngineOptions o;
  o.ctx_size = 512;
  o.live_sessions = 1;
  o.max_batch = 1;
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, o);
  int parsed = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    GenerationRequest r = ChatRequest({Msg(ChatRole::kUser, "Describe a person as JSON.")}, 40);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    auto out = RunNow(engine, r);
    ASSERT_TRUE(out.result);
    parsed += json::accept(out.result->parsed.content);
  }
  EXPECT_EQ(parsed, 0);
}

// A forced tool call: the opening of the DSML block is forced (special tokens allowed),
// then the model writes on freely.
TEST(StructuredOutputTest, APrefixConstraintForcesTheOpeningOnly) {
  const std::string opening = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"ls\">\n";
  auto grammar =
      OneOfTextsGrammar({opening, "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"cat\">\n"});
  ASSERT_TRUE(grammar.ok());
  EngineOptions o;
  o.ctx_size = 512;
  o.live_sessions = 1;
  o.max_batch = 1;
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, o);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    GenerationRequest r = ChatRequest({Msg(ChatRole::kUser, "List the files.")}, 60);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.tools_active = true;
    r.constraint = *grammar;
    r.constraint_prefix = true;
    auto out = RunNow(engine, r);
    ASSERT_TRUE(out.result) << out.error.ToString();
    const std::string& text = out.result->text;
    const bool ls = text.rfind(opening, 0) == 0;
    const bool cat =
        text.rfind("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"cat\">\n", 0) == 0;
    EXPECT_TRUE(ls || cat) << seed << ": " << text;
    EXPECT_GT(text.size(), opening.size()) << seed;  // free after the opening
  }
}

}  // namespace
}  // namespace flashkv
