#include "server/json_util.h"

#include <cmath>

#include "server/json_builder.h"

namespace flashkv {

const char* JsonTypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "number";
    default:
      return "value";
  }
}

Expected<Json> ParseJsonObject(std::string_view body, WorkBudget* budget) {
  if (!JsonDepthWithin(body, kMaxJsonDepth)) {
    return InvalidArgument("JSON nesting deeper than {} levels", kMaxJsonDepth);
  }
  // Linear in the body and bounded in values (json_builder.h), not Json::parse.
  FLASHKV_ASSIGN_OR_RETURN(Json j, BuildJson(body, kMaxJsonValues, nullptr, budget));
  if (!j.is_object())
    return InvalidArgument("request body must be a JSON object, not {}", JsonTypeName(j));
  return j;
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Expected<std::optional<std::string>> OptString(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string())
    return InvalidArgument("'{}' must be a string, not {}", key, JsonTypeName(*it));
  return std::optional<std::string>(it->get<std::string>());
}

Expected<std::optional<bool>> OptBool(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean())
    return InvalidArgument("'{}' must be a boolean, not {}", key, JsonTypeName(*it));
  return std::optional<bool>(it->get<bool>());
}

Expected<std::optional<double>> OptNumber(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number())
    return InvalidArgument("'{}' must be a number, not {}", key, JsonTypeName(*it));
  const double v = it->get<double>();
  if (!std::isfinite(v)) return InvalidArgument("'{}' must be finite", key);
  return std::optional<double>(v);
}

Expected<std::optional<int64_t>> OptInt(const Json& obj, std::string_view key, int64_t lo,
                                        int64_t hi) {
  FLASHKV_ASSIGN_OR_RETURN(std::optional<double> v, OptNumber(obj, key));
  if (!v) return std::optional<int64_t>();
  if (std::floor(*v) != *v) return InvalidArgument("'{}' must be an integer, not {}", key, *v);
  if (*v < double(lo) || *v > double(hi)) {
    return InvalidArgument("'{}' must be between {} and {}, not {}", key, lo, hi, *v);
  }
  return std::optional<int64_t>(int64_t(*v));
}

}  // namespace flashkv
