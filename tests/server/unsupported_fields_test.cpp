// Issue 32: no request field is silently ignored. Every field or part this server cannot
// honour is a 400 naming it (through ReadApiRequest, the path every endpoint reads bodies
// by); the inert values clients send by default (false, 0, null, "", {}) stay accepted.
#include <gtest/gtest.h>

#include "server/api_errors.h"
#include "server/request_reader.h"

namespace flashkv {
namespace {

struct Refused {
  Dialect dialect;
  const char* body;
  const char* says;  // a substring of the message
};

const Refused kRefused[] = {
    // Chat Completions: parts the model cannot read.
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":[{"type":"text","text":"what is this?"},
         {"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]})",
     "'messages[0].content[1]' is a \"image_url\" part"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":[{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}}]}]})",
     "\"input_audio\" part"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":[{"type":"file","file":{"file_id":"f"}}]}]})", "\"file\" part"},
    // Chat Completions: fields that would change the reply.
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"string","pattern":"^a"}}}})",
     "'response_format.json_schema.schema': 'pattern' is not supported"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"ls"}}]})",
     "'response_format' with 'tools' is not supported"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"tool_choice":"required"})",
     "'tool_choice' forces a tool call but 'tools' is empty"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"tools":[{"type":"function","function":{"name":"ls"}}],"tool_choice":{"type":"function","function":{"name":"rm"}}})",
     "'tool_choice.function.name' names \"rm\", which is not in 'tools'"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}})",
     "'tool_choice.type' \"allowed_tools\" is not supported"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"presence_penalty":0.5})",
     "'presence_penalty' is not supported"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"frequency_penalty":-1})",
     "'frequency_penalty' is not supported"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"logit_bias":{"42":-100}})",
     "'logit_bias' is not supported"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"modalities":["text","audio"]})",
     "'modalities' may hold only \"text\""},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"audio":{"voice":"alloy","format":"wav"}})",
     "'audio' is not supported"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"functions":[{"name":"ls","parameters":{}}]})",
     "'functions' is not supported: declare them in 'tools'"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"function_call":"auto"})",
     "'function_call' is not supported"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"web_search_options":{"a":1}})",
     "'web_search_options' is not supported"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"n":2})",
     "'n' must be 1: this server returns one choice per request"},
    // Completions.
    {Dialect::kCompletions, R"({"prompt":"x","echo":true})", "'echo' is not supported"},
    {Dialect::kCompletions, R"({"prompt":"x","suffix":"}"})", "'suffix' is not supported"},
    {Dialect::kCompletions, R"({"prompt":["a","b"]})", "'prompt' holds 2 prompts"},
    {Dialect::kCompletions, R"({"prompt":"x","presence_penalty":1})",
     "'presence_penalty' is not supported"},
    {Dialect::kCompletions, R"({"prompt":"x","n":3})", "'n' must be 1"},
    {Dialect::kCompletions, R"({"prompt":"x","best_of":2})", "'best_of' must be 1"},
    // Anthropic Messages.
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"see"},
         {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]}]})",
     "'messages[0].content[1]' is an \"image\" block"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"}}]}]})",
     "\"document\" block"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"search_result","source":"s","title":"t","content":[]}]}]})",
     "\"search_result\" block"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"container_upload","file_id":"f"}]}]})",
     "\"container_upload\" block"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[
         {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]},
         {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[
           {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]}]}]})",
     "'messages[1].content[0].content[0]' is an \"image\" block"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"a","input_schema":{}}],"tool_choice":{"type":"tool","name":"b"}})",
     "'tool_choice.name' names \"b\", which is not in 'tools'"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"mcp_servers":[{"type":"url","url":"u","name":"n"}]})",
     "'mcp_servers' is not supported"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"container":"c1"})",
     "'container' is not supported"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"output_config":{"format":{"type":"json_schema","schema":{"type":"integer","minimum":0}}}})",
     "'output_config.format.schema': 'minimum' is not supported"},
    // Responses.
    {Dialect::kResponses,
     R"({"input":[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"u"}]}]})",
     "part type \"input_image\" is not supported"},
    {Dialect::kResponses,
     R"({"input":[{"type":"message","role":"user","content":[{"type":"input_file","file_id":"f"}]}]})",
     "part type \"input_file\" is not supported"},
    {Dialect::kResponses,
     R"({"input":[{"type":"message","role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}}]}]})",
     "part type \"input_audio\" is not supported"},
    {Dialect::kResponses,
     R"({"input":[{"type":"function_call","call_id":"c1","name":"view_image","arguments":"{}"},
         {"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"u"}]}]})",
     "is an \"input_image\" part"},
    {Dialect::kResponses,
     R"({"input":"x","text":{"format":{"type":"json_schema","name":"a","schema":{"oneOf":[]}}}})",
     "'text.format.schema': 'oneOf' is not supported"},
    {Dialect::kResponses, R"({"input":"x","tool_choice":{"type":"file_search"}})",
     "is not supported"},
    {Dialect::kResponses, R"({"input":"x","background":true})", "'background' is not supported"},
    {Dialect::kResponses, R"({"input":"x","prompt":{"id":"pmpt_1"}})", "'prompt' is not supported"},
};

TEST(UnsupportedFieldsTest, EachIsA400NamingIt) {
  for (const Refused& r : kRefused) {
    Expected<ApiRequest> got = ReadApiRequest(r.dialect, r.body);
    ASSERT_FALSE(got.ok()) << r.body;
    EXPECT_EQ(HttpStatusFor(got.status()), 400) << r.body;
    EXPECT_NE(got.status().message().find(r.says), std::string::npos)
        << r.body << "\n  -> " << got.status().message();
  }
}

// What clients send by default when they use none of these features.
TEST(UnsupportedFieldsTest, InertDefaultsAreAccepted) {
  const std::pair<Dialect, const char*> accepted[] = {
      {Dialect::kChatCompletions,
       R"({"messages":[{"content":[{"type":"text","text":"x"}]},
           {"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},{"content":"y"}],
           "presence_penalty":0,"frequency_penalty":0,"logit_bias":{},"modalities":["text"],
           "response_format":{"type":"text"},"tool_choice":"auto","audio":null,
           "functions":[],"web_search_options":null})"},
      {Dialect::kCompletions, R"({"prompt":["x"],"echo":false,"suffix":"","n":1,"best_of":1})"},
      {Dialect::kAnthropic,
       R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"mcp_servers":[],
           "tool_choice":{"type":"auto"}})"},
      {Dialect::kResponses,
       R"({"input":"x","text":{"format":{"type":"text"}},"background":false,"tool_choice":"auto"})"},
  };
  for (const auto& [dialect, body] : accepted) {
    Expected<ApiRequest> got = ReadApiRequest(dialect, body);
    EXPECT_TRUE(got.ok()) << body << "\n  -> " << got.status().ToString();
  }
  // An assistant's refusal part is its text.
  Expected<ApiRequest> chat = ReadApiRequest(Dialect::kChatCompletions, accepted[0].second);
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->messages[1].content, "no");
}

}  // namespace
}  // namespace flashkv
