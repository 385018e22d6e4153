#include "server/request_reader.h"

#include "server/anthropic_messages.h"
#include "server/openai_chat.h"
#include "server/openai_responses.h"
#include "server/request_schema.h"

namespace flashkv {
namespace {

Expected<ApiRequest> ParseDialect(Dialect d, const Json& body) {
  switch (d) {
    case Dialect::kChatCompletions:
      return ParseChatCompletionsRequest(body);
    case Dialect::kCompletions:
      return ParseCompletionsRequest(body);
    case Dialect::kResponses:
      return ParseResponsesRequest(body);
    case Dialect::kAnthropic:
      return ParseAnthropicRequest(body);
  }
  return Internal("unknown dialect");
}

}  // namespace

Expected<ApiRequest> ReadApiRequest(Dialect dialect, std::string_view body, WorkBudget* budget) {
  FLASHKV_ASSIGN_OR_RETURN(Json json, ParseJsonObject(body, budget));
  FLASHKV_ASSIGN_OR_RETURN(ApiRequest request, ParseDialect(dialect, json));
  FLASHKV_RETURN_IF_ERROR(ValidateRequestSchema(dialect, json));
  return request;
}

}  // namespace flashkv
