// logprobs / top_logprobs in the three OpenAI APIs (issue 32): the request fields, and the
// engine's per-token entries in each API's shape, whole and streamed — the answer's tokens
// only (reasoning tokens are left out), each exactly once.
#include <gtest/gtest.h>

#include "server/openai_chat.h"
#include "server/openai_responses.h"
#include "server/request_reader.h"
#include "sse_test_util.h"

namespace flashkv {
namespace {

using testing::ParseSse;

TokenLogprob Tok(std::string token, float logprob, bool reasoning = false) {
  TokenLogprob t;
  t.token = std::move(token);
  t.logprob = logprob;
  t.top = {{t.token, logprob}, {"\xe4\xbd", -3.5f}};  // an alternative that is half a character
  t.reasoning = reasoning;
  return t;
}

GenerationEvent Chat(ChatEvent::Kind kind, std::string text, std::vector<TokenLogprob> lp) {
  GenerationEvent ev;
  ev.kind = GenerationEvent::Kind::kChat;
  ev.chat = ChatEvent{kind, std::move(text), -1};
  ev.logprobs = std::move(lp);
  return ev;
}

// A thinking reply "r" then "Hello!": tokens r | He llo | ! , where "!" reached no event.
struct Reply {
  std::vector<GenerationEvent> events;
  GenerationResult result;
};

Reply ThinkingReply() {
  Reply r;
  r.events.push_back(Chat(ChatEvent::Kind::kReasoning, "r", {Tok("r", -0.2f, true)}));
  r.events.push_back(Chat(ChatEvent::Kind::kContent, "He", {Tok("He", -0.5f)}));
  r.events.push_back(Chat(ChatEvent::Kind::kContent, "llo!", {Tok("llo", -0.1f)}));
  r.result.logprobs = {Tok("r", -0.2f, true), Tok("He", -0.5f), Tok("llo", -0.1f), Tok("!", -0.7f)};
  r.result.parsed.reasoning = "r";
  r.result.parsed.content = "Hello!";
  r.result.text = "r</think>Hello!";
  return r;
}

ResponseContext Ctx(const char* id, bool logprobs) {
  ResponseContext ctx{id, "m", 1, false, false, {}, logprobs};
  return ctx;
}

void ExpectAnswerEntries(const Json& entries) {
  ASSERT_TRUE(entries.is_array()) << entries.dump();
  ASSERT_EQ(entries.size(), 3u) << entries.dump();
  EXPECT_EQ(entries[0]["token"], "He");
  EXPECT_FLOAT_EQ(entries[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(entries[0]["bytes"], Json::array({72, 101}));
  EXPECT_EQ(entries[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(entries[0]["top_logprobs"][1]["bytes"], Json::array({0xe4, 0xbd}));
  EXPECT_EQ(entries[0]["top_logprobs"][1]["token"], "\xef\xbf\xbd");  // U+FFFD
  EXPECT_EQ(entries[1]["token"], "llo");
  EXPECT_EQ(entries[2]["token"], "!");
}

TEST(LogprobsApiTest, RequestFields) {
  auto chat = ReadApiRequest(Dialect::kChatCompletions,
                             R"({"messages":[{"content":"x"}],"logprobs":true,"top_logprobs":3})");
  ASSERT_TRUE(chat.ok()) << chat.status().ToString();
  EXPECT_EQ(chat->logprobs, 3);
  auto plain =
      ReadApiRequest(Dialect::kChatCompletions,
                     R"({"messages":[{"content":"x"}],"logprobs":false,"top_logprobs":0})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->logprobs, -1);
  auto orphan = ReadApiRequest(Dialect::kChatCompletions,
                               R"({"messages":[{"content":"x"}],"top_logprobs":2})");
  ASSERT_FALSE(orphan.ok());
  EXPECT_NE(orphan.status().message().find("'top_logprobs' needs 'logprobs': true"),
            std::string::npos);
  auto too_many =
      ReadApiRequest(Dialect::kChatCompletions,
                     R"({"messages":[{"content":"x"}],"logprobs":true,"top_logprobs":21})");
  EXPECT_FALSE(too_many.ok());
  auto legacy = ReadApiRequest(Dialect::kCompletions, R"({"prompt":"x","logprobs":2})");
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->logprobs, 2);
  auto resp = ReadApiRequest(Dialect::kResponses,
                             R"({"input":"x","include":["message.output_text.logprobs"]})");
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->logprobs, 0);
  auto resp_top = ReadApiRequest(Dialect::kResponses, R"({"input":"x","top_logprobs":5})");
  ASSERT_TRUE(resp_top.ok());
  EXPECT_EQ(resp_top->logprobs, 5);
  auto none = ReadApiRequest(Dialect::kResponses, R"({"input":"x"})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->logprobs, -1);
}

TEST(LogprobsApiTest, ChatBodyAndStream) {
  Reply reply = ThinkingReply();
  Json body = ChatCompletionResponse(Ctx("chatcmpl-1", true), reply.result);
  ExpectAnswerEntries(body["choices"][0]["logprobs"]["content"]);
  EXPECT_TRUE(
      ChatCompletionResponse(Ctx("chatcmpl-1", false), reply.result)["choices"][0]["logprobs"]
          .is_null());

  auto enc = NewChatCompletionsStream(Ctx("chatcmpl-2", true));
  std::string sse = enc->Start(CacheInfo{});
  for (const GenerationEvent& ev : reply.events) sse += enc->Delta(ev);
  sse += enc->Finish(reply.result);
  Json streamed = Json::array();
  for (const auto& ev : ParseSse(sse)) {
    if (ev.json.is_null()) continue;
    const Json& lp = ev.json["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (const Json& e : lp["content"]) streamed.push_back(e);
  }
  ExpectAnswerEntries(streamed);
}

TEST(LogprobsApiTest, CompletionsBodyAndStream) {
  GenerationResult r;
  r.text = "Hello";
  r.logprobs = {Tok("He", -0.5f), Tok("llo", -0.1f)};
  Json lp = CompletionResponse(Ctx("cmpl-1", true), r)["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json::array({"He", "llo"}));
  EXPECT_EQ(lp["text_offset"], Json::array({0, 2}));
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -0.1f);
  EXPECT_FLOAT_EQ(lp["top_logprobs"][0]["He"].get<float>(), -0.5f);

  auto enc = NewCompletionsStream(Ctx("cmpl-2", true));
  GenerationEvent ev;
  ev.kind = GenerationEvent::Kind::kText;
  ev.text = "He";
  ev.logprobs = {r.logprobs[0]};
  std::string sse = enc->Start(CacheInfo{});
  sse += enc->Delta(ev);
  sse += enc->Finish(r);
  Json tokens = Json::array();
  Json offsets = Json::array();
  for (const auto& e : ParseSse(sse)) {
    if (e.json.is_null() || e.json["choices"].empty()) continue;
    const Json& l = e.json["choices"][0]["logprobs"];
    for (const Json& t : l["tokens"]) tokens.push_back(t);
    for (const Json& o : l["text_offset"]) offsets.push_back(o);
  }
  EXPECT_EQ(tokens, Json::array({"He", "llo"}));
  EXPECT_EQ(offsets, Json::array({0, 2}));
}

TEST(LogprobsApiTest, ResponsesBodyAndStream) {
  Reply reply = ThinkingReply();
  Json body = ResponsesResponse(Ctx("resp_1", true), reply.result);
  Json message;
  for (const Json& item : body["output"]) {
    if (item["type"] == "message") message = item;
  }
  ExpectAnswerEntries(message["content"][0]["logprobs"]);
  // A local: a range-for over a member of a temporary would read it after it is gone.
  const Json plain = ResponsesResponse(Ctx("resp_1", false), reply.result);
  for (const Json& item : plain["output"]) {
    if (item["type"] == "message") {
      EXPECT_FALSE(item["content"][0].contains("logprobs"));
    }
  }

  // Streamed with the deltas; the final response object holds them all.
  auto enc = NewResponsesStream(Ctx("resp_2", true));
  std::string sse = enc->Start(CacheInfo{});
  for (const GenerationEvent& ev : reply.events) sse += enc->Delta(ev);
  sse += enc->Finish(reply.result);
  Json streamed = Json::array();
  for (const auto& ev : ParseSse(sse)) {
    if (ev.json.is_null() || ev.json["type"] != "response.output_text.delta") continue;
    for (const Json& e : ev.json["logprobs"]) streamed.push_back(e);
  }
  ASSERT_EQ(streamed.size(), 2u);  // "!" reached no delta
  EXPECT_EQ(streamed[0]["token"], "He");
  EXPECT_EQ(streamed[1]["token"], "llo");
}

}  // namespace
}  // namespace flashkv
