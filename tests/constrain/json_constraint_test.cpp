// Constrained decoding (issue 32): the schema compiler refuses what it cannot enforce, the
// matcher accepts exactly the JSON its schema allows, and random walks through the token
// mask — any allowed token, any order — always end in a value that parses and validates.
#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "constrain/json_grammar.h"
#include "constrain/json_matcher.h"
#include "constrain/token_constraint.h"

namespace flashkv {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const JsonGrammar> Compile(const char* schema) {
  auto g = CompileJsonSchema(json::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

bool Matches(const std::shared_ptr<const JsonGrammar>& g, std::string_view text) {
  JsonMatcher m(g);
  for (char c : text) {
    if (!m.Feed(uint8_t(c))) return false;
  }
  return m.can_end();
}

// The subset of JSON Schema the compiler supports, checked independently of the matcher.
bool Validates(const json& v, const json& s, const json& root) {
  if (s.contains("$ref")) {
    const std::string r = s["$ref"];
    return Validates(v, root["$defs"][r.substr(std::string("#/$defs/").size())], root);
  }
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) {
    for (const json& e : s["enum"]) {
      if (v == e) return true;
    }
    return false;
  }
  if (s.contains("anyOf")) {
    for (const json& a : s["anyOf"]) {
      if (Validates(v, a, root)) return true;
    }
    return false;
  }
  if (!s.contains("type")) return true;
  std::vector<std::string> types;
  if (s["type"].is_string()) {
    types.push_back(s["type"]);
  } else {
    for (const json& t : s["type"]) types.push_back(t);
  }
  for (const std::string& t : types) {
    if (t == "null" && v.is_null()) return true;
    if (t == "boolean" && v.is_boolean()) return true;
    if (t == "integer" && v.is_number_integer()) return true;
    if (t == "number" && v.is_number()) return true;
    if (t == "string" && v.is_string()) {
      size_t chars = 0;  // code points: bytes that do not continue a character
      for (char c : v.get<std::string>()) chars += (uint8_t(c) & 0xC0) != 0x80;
      return !s.contains("maxLength") || chars <= s["maxLength"].get<size_t>();
    }
    if (t == "array" && v.is_array()) {
      if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
      for (const json& item : v) {
        if (s.contains("items") && !Validates(item, s["items"], root)) return false;
      }
      return true;
    }
    if (t == "object" && v.is_object()) {
      for (const json& r : s.value("required", json::array())) {
        if (!v.contains(r.get<std::string>())) return false;
      }
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!s.contains("properties")) continue;
        if (!s["properties"].contains(it.key())) return false;
        if (!Validates(it.value(), s["properties"][it.key()], root)) return false;
      }
      return true;
    }
  }
  return false;
}

const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 6},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "bc", 1, 12, null]}, "maxItems": 3},
    "pet": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]},
    "score": {"type": ["number", "null"]},
    "ok": {"type": "boolean"}
  },
  "required": ["name", "age", "ok"],
  "additionalProperties": false
})";

TEST(JsonConstraintTest, MatcherAcceptsExactlyTheSchemasValues) {
  auto g = Compile(kPerson);
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, R"({"name":"Al","age":3,"ok":true})"));
  EXPECT_TRUE(Matches(g, R"({"name":"\u00e9\"","age":-0,"pet":null,"score":1.5e-3,"ok":false})"));
  EXPECT_TRUE(Matches(g, R"({"name":"","age":12,"tags":[12,1,"bc"],"ok":true})"));
  EXPECT_FALSE(Matches(g, R"({"age":3,"name":"Al","ok":true})"));       // declaration order
  EXPECT_FALSE(Matches(g, R"({"age":3,"ok":true})"));                   // name is required
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3.5,"ok":true})"));     // integer
  EXPECT_FALSE(Matches(g, R"({"name":"Alberto","age":3,"ok":true})"));  // maxLength
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3,"tags":[1,1,1,1],"ok":true})"));  // maxItems
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3,"ok":true,"x":1})"));             // no other keys
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":01,"ok":true})"));                  // leading zero
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3,"ok":true} )"));                  // nothing after
  EXPECT_FALSE(Matches(g, "{\"name\":\"a\x01\",\"age\":3,\"ok\":true}"));           // control char
  EXPECT_FALSE(Matches(g, "{\"name\":\"\xc3\",\"age\":3,\"ok\":true}"));            // broken UTF-8
  EXPECT_FALSE(Matches(g, R"({"name": "Al","age":3,"ok":true})"));  // compact: no spaces
  EXPECT_FALSE(Matches(g, "{\"name\":\"\xed\xa0\x80\",\"age\":3,\"ok\":true}"));     // surrogate
  EXPECT_TRUE(Matches(g, "{\"name\":\"\xf0\x9f\x98\x80\",\"age\":3,\"ok\":true}"));  // U+1F600

  auto any = AnyJsonObjectGrammar();
  EXPECT_TRUE(Matches(any, R"({})"));
  EXPECT_TRUE(Matches(any, R"({"a":[1,{"b":null}],"c":"d","a":true})"));
  EXPECT_FALSE(Matches(any, R"([1])"));
  EXPECT_FALSE(Matches(any, R"("x")"));

  auto number = Compile(R"({"type":"number"})");
  JsonMatcher m(number);
  for (char c : std::string("12")) ASSERT_TRUE(m.Feed(uint8_t(c)));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.done());  // a top-level number could go on
}

TEST(JsonConstraintTest, RecursiveRefs) {
  auto g = Compile(R"({"$defs":{"node":{"type":"object","properties":{
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2},
      "v":{"type":"integer"}},"required":["v"]}},"$ref":"#/$defs/node"})");
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, R"({"kids":[{"v":1},{"kids":[],"v":2}],"v":0})"));
  EXPECT_FALSE(Matches(g, R"({"kids":[{}],"v":0})"));
  EXPECT_FALSE(Matches(g, R"({"v":0,"kids":[]})"));
}

TEST(JsonConstraintTest, WhatCannotBeEnforcedIsRefusedByName) {
  const std::pair<const char*, const char*> refused[] = {
      {R"({"type":"string","pattern":"^a"})", "'pattern' is not supported"},
      {R"({"type":"object","properties":{"d":{"type":"string","format":"date"}}})",
       "'properties.d.format' is not supported"},
      {R"({"type":"integer","minimum":3})", "'minimum' is not supported"},
      {R"({"oneOf":[{"type":"string"}]})", "'oneOf' is not supported"},
      {R"({"anyOf":[{"type":"string"},{"type":"string","maxLength":2}]})",
       "alternatives must start differently"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "names \"b\""},
      {R"({"type":"color"})", "not a JSON Schema type"},
  };
  for (const auto& [schema, says] : refused) {
    auto g = CompileJsonSchema(json::parse(schema));
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.status().message().find(says), std::string::npos)
        << schema << " -> " << g.status().message();
  }
}

// A vocabulary like a byte-level BPE one: every byte alone, and multi-byte pieces that
// cross JSON structure (`":`, `},{`, `"}`, digits with punctuation, spaces).
std::vector<std::string> Vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  for (const char* piece : {"\":",      "\",\"",
                            "},{",      "\"}",
                            "{\"",      "[\"",
                            "\"]",      "12",
                            "3.",       "e-",
                            "true",     "fal",
                            "se",       "null",
                            "nu",       "name",
                            "age",      "\":\"",
                            " \"",      "\": ",
                            "\n",       "bc",
                            "\"a\"",    ",\"ok\":",
                            "\xc3\xa9", "\xc3",
                            "\xa9",     "1}",
                            "0,",       ",[",
                            "]}",       "ab\"",
                            "x\\n",     "\xe4\xbd\xa0\xe5",
                            "\xa5\xbd", "abcdefgh",
                            "<|eos|>"}) {
    v.push_back(piece);
  }
  return v;
}

TEST(JsonConstraintTest, RandomWalksThroughTheMaskAlwaysEndInAValidValue) {
  const std::vector<std::string> vocab = Vocab();
  const int32_t eos = int32_t(vocab.size()) - 1;
  std::vector<bool> usable(vocab.size(), true);
  usable[size_t(eos)] = false;  // special: only ever allowed as the end
  auto trie = std::make_shared<const TokenTrie>(vocab, usable);
  const json schema = json::parse(kPerson);
  auto grammar = Compile(kPerson);
  ASSERT_TRUE(grammar);
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    TokenConstraint c(grammar, trie, eos);
    JsonMatcher shadow(grammar);  // the same value, fed byte by byte
    std::string out;
    bool ended = false;
    for (int step = 0; step < 400 && !ended; ++step) {
      std::vector<float> logits(vocab.size(), 0.0f);
      // Random preferences, with closing punctuation favoured late so walks finish.
      for (float& l : logits) l = float(rng() % 1000) / 100.0f;
      if (step > 60) {
        for (const char* close : {"}", "]", "\"", "\"}", "]}"}) {
          for (size_t i = 0; i < vocab.size(); ++i) {
            if (vocab[i] == close) logits[i] += 50.0f;
          }
        }
      }
      ASSERT_GT(c.Mask(logits), 0u) << seed << ": stuck after " << out;
      // The mask (fast path inside strings included) is exactly "all bytes fit".
      for (size_t i = 0; i < vocab.size(); ++i) {
        bool fits = int32_t(i) == eos ? shadow.can_end() : usable[i];
        if (int32_t(i) != eos && fits) {
          JsonMatcher m = shadow;
          for (char ch : vocab[i]) fits = fits && m.Feed(uint8_t(ch));
        }
        ASSERT_EQ(!std::isinf(logits[i]), fits) << seed << " token " << i << " after " << out;
      }
      size_t best = 0;
      for (size_t i = 1; i < logits.size(); ++i) {
        if (logits[i] > logits[best]) best = i;
      }
      if (int32_t(best) == eos) {
        ended = true;
        break;
      }
      ASSERT_TRUE(c.Accept(vocab[best])) << seed;
      for (char ch : vocab[best]) ASSERT_TRUE(shadow.Feed(uint8_t(ch)));
      out += vocab[best];
      ended = c.done();
    }
    ASSERT_TRUE(ended) << seed << ": " << out;
    json v;
    ASSERT_NO_THROW(v = json::parse(out)) << seed << ": " << out;
    EXPECT_TRUE(Validates(v, schema, schema)) << seed << ": " << out;
  }
}

TEST(JsonConstraintTest, SpecialTokensAndBrokenValuesAreMasked) {
  const std::vector<std::string> vocab = Vocab();
  const int32_t eos = int32_t(vocab.size()) - 1;
  std::vector<bool> usable(vocab.size(), true);
  usable[size_t(eos)] = false;
  auto trie = std::make_shared<const TokenTrie>(vocab, usable);
  TokenConstraint c(AnyJsonObjectGrammar(), trie, eos);
  std::vector<float> logits(vocab.size(), 0.0f);
  EXPECT_EQ(c.Mask(logits), 2u);  // "{" and "{\""
  EXPECT_EQ(logits['{'], 0.0f);
  EXPECT_TRUE(std::isinf(logits[size_t(eos)]));
  EXPECT_TRUE(std::isinf(logits[' ']));
  ASSERT_TRUE(c.Accept("{"));
  ASSERT_TRUE(c.Accept("}"));
  EXPECT_TRUE(c.done());
  std::vector<float> after(vocab.size(), 0.0f);
  EXPECT_EQ(c.Mask(after), 1u);  // EOS alone
  EXPECT_EQ(after[size_t(eos)], 0.0f);
  EXPECT_FALSE(c.Accept("x"));
}

}  // namespace
}  // namespace flashkv
