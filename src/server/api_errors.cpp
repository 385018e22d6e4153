#include "server/api_errors.h"

namespace flashkv {

Dialect DialectForPath(const std::string& path) {
  if (path.starts_with("/v1/messages")) return Dialect::kAnthropic;
  if (path.starts_with("/v1/responses")) return Dialect::kResponses;
  if (path.starts_with("/v1/completions")) return Dialect::kCompletions;
  return Dialect::kChatCompletions;
}

std::string ErrorType(Dialect dialect, int status) {
  if (dialect == Dialect::kAnthropic) {
    switch (status) {
      case 400:
        return "invalid_request_error";
      case 401:
        return "authentication_error";
      case 403:
        return "permission_error";
      case 404:
        return "not_found_error";
      case 413:
        return "request_too_large";
      case 429:
        return "rate_limit_error";
      case 503:
        return "overloaded_error";
      default:
        return status < 500 ? "invalid_request_error" : "api_error";
    }
  }
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    default:
      return status < 500 ? "invalid_request_error" : "server_error";
  }
}

Json ErrorJson(Dialect dialect, int status, const std::string& message) {
  if (dialect == Dialect::kAnthropic) {
    return Json{{"type", "error"},
                {"error", {{"type", ErrorType(dialect, status)}, {"message", message}}}};
  }
  return Json{{"error",
               {{"message", message},
                {"type", ErrorType(dialect, status)},
                {"param", nullptr},
                {"code", nullptr}}}};
}

int HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported:
    case StatusCode::kResourceExhausted:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kCancelled:
      return 499;
    default:
      return 500;
  }
}

}  // namespace flashkv
