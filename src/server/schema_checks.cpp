#include "server/schema_checks.h"

#include <cmath>

#include "util/json_depth.h"

namespace flashkv::schema {
namespace {

unsigned KindOf(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return kString;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return kNumber;
    case Json::value_t::boolean:
      return kBoolean;
    case Json::value_t::object:
      return kObject;
    case Json::value_t::array:
      return kArray;
    case Json::value_t::null:
      return kNull;
    default:
      return 0;
  }
}

// "a string, an array or null"
std::string KindsText(unsigned kinds) {
  static constexpr std::pair<unsigned, const char*> kNames[] = {
      {kString, "a string"},  {kNumber, "a number"}, {kBoolean, "a boolean"},
      {kObject, "an object"}, {kArray, "an array"},  {kNull, "null"}};
  std::string out;
  int listed = 0;
  const int total = __builtin_popcount(kinds);
  for (const auto& [bit, name] : kNames) {
    if (!(kinds & bit)) continue;
    if (listed > 0) out += listed + 1 == total ? " or " : ", ";
    out += name;
    ++listed;
  }
  return out;
}

// The number at obj[key] when present, not null and a number; nullptr otherwise (after
// the kind check).
Expected<const Json*> NumberField(const Json& obj, std::string_view parent, std::string_view key) {
  const Json* v = Find(obj, key);
  if (v == nullptr || v->is_null()) return static_cast<const Json*>(nullptr);
  FLASHKV_RETURN_IF_ERROR(ExpectKind(*v, Field(parent, key), kNumber));
  return v;
}

}  // namespace

std::string Field(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string out(parent);
  out += '.';
  out += key;
  return out;
}

std::string Item(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

const Json* Find(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

Status ExpectKind(const Json& value, std::string_view path, unsigned kinds) {
  if (KindOf(value) & kinds) return Status::Ok();
  return InvalidArgument("'{}' must be {}, not {}", path, KindsText(kinds), JsonTypeName(value));
}

Status Optional(const Json& obj, std::string_view parent, std::string_view key, unsigned kinds) {
  const Json* v = Find(obj, key);
  return v == nullptr ? Status::Ok() : ExpectKind(*v, Field(parent, key), kinds);
}

Status Required(const Json& obj, std::string_view parent, std::string_view key, unsigned kinds) {
  const Json* v = Find(obj, key);
  if (v == nullptr) return InvalidArgument("'{}' is required", Field(parent, key));
  return ExpectKind(*v, Field(parent, key), kinds);
}

Status NonEmptyString(const Json& obj, std::string_view parent, std::string_view key) {
  FLASHKV_RETURN_IF_ERROR(Required(obj, parent, key, kString));
  if (Find(obj, key)->get_ref<const std::string&>().empty())
    return InvalidArgument("'{}' must not be empty", Field(parent, key));
  return Status::Ok();
}

Status OneOf(const Json& obj, std::string_view parent, std::string_view key,
             std::initializer_list<std::string_view> values) {
  const Json* v = Find(obj, key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  FLASHKV_RETURN_IF_ERROR(ExpectKind(*v, Field(parent, key), kString));
  const std::string& s = v->get_ref<const std::string&>();
  std::string listed;
  for (std::string_view allowed : values) {
    if (s == allowed) return Status::Ok();
    if (!listed.empty()) listed += ", ";
    listed += allowed;
  }
  return InvalidArgument("'{}' must be one of {}; not \"{}\"", Field(parent, key), listed, s);
}

Status IntegerIn(const Json& obj, std::string_view parent, std::string_view key, int64_t lo,
                 int64_t hi) {
  FLASHKV_ASSIGN_OR_RETURN(const Json* v, NumberField(obj, parent, key));
  if (v == nullptr) return Status::Ok();
  const double d = v->get<double>();
  if (!std::isfinite(d) || std::floor(d) != d) {
    return InvalidArgument("'{}' must be an integer, not {}", Field(parent, key), v->dump());
  }
  if (d < double(lo) || d > double(hi)) {
    return InvalidArgument("'{}' must be between {} and {}, not {}", Field(parent, key), lo, hi,
                           v->dump());
  }
  return Status::Ok();
}

Status NumberIn(const Json& obj, std::string_view parent, std::string_view key, double lo,
                double hi) {
  FLASHKV_ASSIGN_OR_RETURN(const Json* v, NumberField(obj, parent, key));
  if (v == nullptr) return Status::Ok();
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    return InvalidArgument("'{}' must be between {} and {}, not {}", Field(parent, key), lo, hi,
                           v->dump());
  }
  return Status::Ok();
}

Status EmbeddedJson(const Json& obj, std::string_view parent, std::string_view key) {
  const Json* v = Find(obj, key);
  if (v == nullptr || !v->is_string()) return Status::Ok();
  if (JsonDepthWithin(v->get_ref<const std::string&>(), kMaxJsonDepth)) return Status::Ok();
  return InvalidArgument("'{}' holds JSON nested deeper than {} levels", Field(parent, key),
                         kMaxJsonDepth);
}

Status NotHonoured(const Json& obj, std::string_view parent, std::string_view key,
                   std::string_view why) {
  const Json* v = Find(obj, key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  const bool inert = (v->is_boolean() && !v->get<bool>()) ||
                     (v->is_number() && v->get<double>() == 0) ||
                     (v->is_string() && v->get_ref<const std::string&>().empty()) ||
                     ((v->is_object() || v->is_array()) && v->empty());
  if (inert) return Status::Ok();
  return Unsupported("'{}' is not supported: {}", Field(parent, key), why);
}

}  // namespace flashkv::schema
