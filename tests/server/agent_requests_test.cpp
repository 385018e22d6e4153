// The request shapes the real coding agents send (captured from Claude Code 2.1.332, Codex
// 0.171.0, Pi 0.73.1 and opencode 1.18.33 against flashkv serve; long texts and tool lists
// shortened), through the dialect parsers and the renderer: what each must be accepted as
// and what prompt text it must become so the session cache can continue it.
#include <gtest/gtest.h>

#include "chat/prompt_renderer.h"
#include "chat/tool_schema.h"
#include "server/anthropic_messages.h"
#include "server/api_request.h"
#include "server/openai_chat.h"
#include "server/openai_responses.h"
#include "server/request_reader.h"

namespace flashkv {
namespace {

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

std::string Render(const ApiRequest& r) {
  PromptOptions po;
  po.thinking = r.thinking;
  po.tools = r.tools;
  return RenderPrompt(r.messages, po);
}

// What the next request of a client starts with after `reply`: the history plus the reply,
// rendered up to the next user turn's marker (how the engine keys a session for disk).
std::string NextPromptPrefix(const ApiRequest& r, ChatMessage reply) {
  std::vector<ChatMessage> next = r.messages;
  next.push_back(std::move(reply));
  next.push_back(ChatMessage{ChatRole::kUser, "x", {}, {}, {}, {}});
  PromptOptions po;
  po.thinking = r.thinking;
  po.tools = r.tools;
  std::string text = RenderPrompt(next, po);
  return text.substr(0, text.rfind("<｜User｜>"));
}

// Claude Code's first request (anthropic-beta: claude-code-20250219,
// interleaved-thinking-2025-05-14, context-management-2025-06-27,
// mid-conversation-tool-changes-2026-07-01, ...): the per-session environment, agent and
// skill listing goes in a system message after the first user message.
constexpr char kClaudeFirst[] = R"({
  "model": "deepseek-v4-flash", "max_tokens": 48, "stream": true,
  "thinking": {"type": "adaptive", "display": "omitted"},
  "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
  "output_config": {"effort": "high"},
  "metadata": {"user_id": "{\"device_id\":\"0b07\",\"account_uuid\":\"\",\"session_id\":\"7a76\"}"},
  "system": [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.0b8; cc_entrypoint=sdk-cli;"},
    {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK.",
     "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "\nYou are an agent working with the user toward their goals.",
     "cache_control": {"type": "ephemeral"}}],
  "tools": [{"name": "Bash", "description": "Executes a given bash command.",
             "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                              "required": ["command"]}}],
  "messages": [
    {"role": "user", "content": [
      {"type": "text", "text": "<system-reminder>\nAttribution for git commits.\n</system-reminder>\n"},
      {"type": "text", "text": "Say hi."}]},
    {"role": "system", "content": [
      {"type": "text", "text": "# Environment\n - Primary working directory: /work\n\nToday's date is 2026-12-01.",
       "cache_control": {"type": "ephemeral"}}]}]
})";

TEST(AgentRequestsTest, ClaudeCodeMidConversationSystemMessageRendersInPlace) {
  auto r = ParseAnthropicRequest(Json::parse(kClaudeFirst));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[2].role, ChatRole::kSystem);
  EXPECT_EQ(r->thinking, ThinkingMode::kHigh);
  const std::string tools = RenderToolsBlock(r->tools);
  const std::string first = Render(*r);
  EXPECT_EQ(first, kBos + tools +
                       "\nYou are a Claude agent, built on Anthropic's Claude Agent SDK.\n"
                       "\nYou are an agent working with the user toward their goals."
                       "<｜User｜><system-reminder>\nAttribution for git commits.\n"
                       "</system-reminder>\nSay hi."
                       "# Environment\n - Primary working directory: /work\n\n"
                       "Today's date is 2026-12-01.<｜Assistant｜><think>");

  // Its next request (here Claude Code's max_tokens recovery) replays the reply and adds a
  // user turn; the system message stays where it was, so the first prompt (up to its
  // assistant marker) and the reply are a prefix of the next one.
  Json second = Json::parse(kClaudeFirst);
  second["messages"].push_back(Json::parse(R"({"role": "assistant", "content": [
      {"type": "thinking", "thinking": "The user greets.", "signature": "msg_1"},
      {"type": "text", "text": "Hi!"}]})"));
  second["messages"].push_back(Json::parse(R"({"role": "user", "content": [
      {"type": "text", "text": "<system-reminder>\nOutput token limit hit. Resume directly.\n</system-reminder>"}]})"));
  auto r2 = ParseAnthropicRequest(second);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  const std::string next = Render(*r2);
  EXPECT_TRUE(next.starts_with(first + "The user greets.</think>Hi!" + kEos + "<｜User｜>"))
      << next.substr(first.size());
  ChatMessage reply{ChatRole::kAssistant, "Hi!", "The user greets.", {}, {}, {}};
  EXPECT_TRUE(next.starts_with(NextPromptPrefix(*r, reply)));
  EXPECT_TRUE(ReplaysReasoning(*r2));
}

// `codex exec resume` after a turn that max_output_tokens cut: Codex replays the
// reasoning item and the assistant message flashkv returned, status "incomplete" included.
constexpr char kCodexResume[] = R"({
  "model": "deepseek-v4-flash", "stream": true, "tool_choice": "auto",
  "parallel_tool_calls": true, "reasoning": {"summary": "auto"}, "store": false,
  "include": ["reasoning.encrypted_content"], "prompt_cache_key": "01a230df",
  "client_metadata": {"session_id": "01a230df"},
  "tools": [{"type": "function", "name": "exec_command", "strict": false,
             "description": "Runs a command in a PTY.",
             "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}},
                            "required": ["cmd"]}},
            {"type": "web_search", "external_web_access": false}],
  "input": [
    {"type": "message", "role": "developer",
     "content": [{"type": "input_text", "text": "You are a coding agent running in the Codex CLI."}]},
    {"type": "message", "role": "user",
     "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/work</cwd>\n</environment_context>"}]},
    {"type": "message", "id": "msg_01a2", "role": "user",
     "content": [{"type": "input_text", "text": "Say hi."}]},
    {"type": "reasoning", "id": "rs_601d",
     "summary": [{"type": "summary_text", "text": "The user greets me"}],
     "content": null, "encrypted_content": null},
    {"type": "message", "status": "incomplete", "id": "msg_f58d", "role": "assistant",
     "content": [{"type": "output_text", "text": "Hel", "annotations": []}]},
    {"type": "message", "id": "msg_01a3", "role": "user",
     "content": [{"type": "input_text", "text": "Say more."}]}]
})";

TEST(AgentRequestsTest, CodexResumeReplaysAnIncompleteReplyWithItsReasoning) {
  auto r = ParseResponsesRequest(Json::parse(kCodexResume));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->messages.size(), 5u);
  EXPECT_EQ(r->messages[3].role, ChatRole::kAssistant);
  EXPECT_EQ(r->messages[3].content, "Hel");
  EXPECT_EQ(r->messages[3].reasoning, "The user greets me");
  EXPECT_TRUE(ReplaysReasoning(*r));

  // The first turn of that session: no reasoning to read yet, but Codex asked for
  // reasoning summaries, so it gets the reasoning as items and sends them back.
  Json first_body = Json::parse(kCodexResume);
  Json& input = first_body["input"];
  input.erase(input.begin() + 3, input.end());
  auto first = ParseResponsesRequest(first_body);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(ReplaysReasoning(*first));
  // Codex's resend continues the key rendered with the reasoning (tools make the template
  // keep it), not the one without: that is the key a disk snapshot must be filed under.
  const std::string resend = Render(*r);
  ChatMessage reply{ChatRole::kAssistant, "Hel", "The user greets me", {}, {}, {}};
  EXPECT_TRUE(resend.starts_with(NextPromptPrefix(*first, reply)));
  reply.reasoning.clear();
  EXPECT_FALSE(resend.starts_with(NextPromptPrefix(*first, reply)));

  // Cut inside its thinking, the reply is only a reasoning item, and Codex replays just
  // that: it is the assistant turn, rendered as the engine keyed the session.
  Json thinking_only = Json::parse(kCodexResume);
  Json& items = thinking_only["input"];
  items.erase(items.begin() + 4);
  auto cut = ParseResponsesRequest(thinking_only);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  ASSERT_EQ(cut->messages.size(), 5u);
  EXPECT_EQ(cut->messages[3].role, ChatRole::kAssistant);
  EXPECT_EQ(cut->messages[3].reasoning, "The user greets me");
  EXPECT_EQ(cut->messages[3].content, "");
  reply = ChatMessage{ChatRole::kAssistant, "", "The user greets me", {}, {}, {}};
  EXPECT_TRUE(Render(*cut).starts_with(NextPromptPrefix(*first, reply)));

  // Without reasoning summaries the client never sees the reasoning.
  first_body.erase("reasoning");
  auto plain = ParseResponsesRequest(first_body);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(ReplaysReasoning(*plain));
}

// Pi with thinking off and opencode with thinking on, second turns: reasoning_content is
// replayed when the reply had any (opencode's thinking-only reply), "" otherwise (Pi).
TEST(AgentRequestsTest, ChatClientsReplayReasoningContentOrNot) {
  auto opencode = ParseChatCompletionsRequest(Json::parse(R"({
    "model": "deepseek-v4-flash", "max_tokens": 48, "tool_choice": "auto", "stream": true,
    "stream_options": {"include_usage": true},
    "messages": [
      {"role": "system", "content": "You are opencode, an interactive CLI tool."},
      {"role": "user", "content": "Say hi."},
      {"role": "assistant", "content": "", "reasoning_content": "The user greets"},
      {"role": "user", "content": "Say more."}]})"));
  ASSERT_TRUE(opencode.ok()) << opencode.status().ToString();
  EXPECT_TRUE(ReplaysReasoning(*opencode));
  auto pi = ParseChatCompletionsRequest(Json::parse(R"({
    "model": "deepseek-v4-flash", "max_tokens": 48, "thinking": {"type": "disabled"},
    "stream": true, "stream_options": {"include_usage": true},
    "messages": [
      {"role": "developer", "content": "You are an expert coding assistant operating inside pi."},
      {"role": "user", "content": [{"type": "text", "text": "Say hi."}]},
      {"role": "assistant", "content": "Hello", "reasoning_content": ""},
      {"role": "user", "content": [{"type": "text", "text": "Say more."}]}]})"));
  ASSERT_TRUE(pi.ok()) << pi.status().ToString();
  EXPECT_FALSE(ReplaysReasoning(*pi));
  // A first chat turn: chat clients get reasoning_content and mostly send it back.
  pi->messages.resize(2);
  EXPECT_TRUE(ReplaysReasoning(*pi));
}

// What each agent sends passes the whole read path an endpoint uses (JSON limits, the
// dialect parser and the request schema), not only the parser.
TEST(AgentRequestsTest, TheirShapesPassTheRequestSchema) {
  EXPECT_TRUE(ReadApiRequest(Dialect::kAnthropic, kClaudeFirst).ok())
      << ReadApiRequest(Dialect::kAnthropic, kClaudeFirst).status().ToString();
  EXPECT_TRUE(ReadApiRequest(Dialect::kResponses, kCodexResume).ok())
      << ReadApiRequest(Dialect::kResponses, kCodexResume).status().ToString();
  for (const char* body : {
           R"({"model": "deepseek-v4-flash", "max_tokens": 48, "tool_choice": "auto",
               "stream": true, "stream_options": {"include_usage": true},
               "messages": [{"role": "system", "content": "You are opencode."},
                            {"role": "user", "content": "Say hi."},
                            {"role": "assistant", "content": "", "reasoning_content": "r"},
                            {"role": "user", "content": "Say more."}]})",
           R"({"model": "deepseek-v4-flash", "max_tokens": 48, "thinking": {"type": "disabled"},
               "stream": true, "stream_options": {"include_usage": true},
               "messages": [{"role": "developer", "content": "pi"},
                            {"role": "user", "content": [{"type": "text", "text": "Say hi."}]},
                            {"role": "assistant", "content": "Hello", "reasoning_content": ""}]})"}) {
    Expected<ApiRequest> r = ReadApiRequest(Dialect::kChatCompletions, body);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }
}

}  // namespace
}  // namespace flashkv
