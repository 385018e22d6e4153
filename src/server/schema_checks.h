// Field checks the request schemas (request_schema.h) are written in: a JSON value's kind,
// a string's allowed values, a number's range, and the depth of JSON carried inside a
// string. Each error names the field by its path in the body ("messages[2].content[0]"),
// so a client sees exactly which value was refused. Absent fields pass every check but
// Required. Must not: know any API's fields.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "server/json_util.h"
#include "util/status.h"

namespace flashkv::schema {

// Kinds a field may have, or-ed together.
enum Kind : unsigned {
  kString = 1u << 0,
  kNumber = 1u << 1,
  kBoolean = 1u << 2,
  kObject = 1u << 3,
  kArray = 1u << 4,
  kNull = 1u << 5,
};

// "parent.key" ("key" at the top level) and "parent[i]".
std::string Field(std::string_view parent, std::string_view key);
std::string Item(std::string_view parent, size_t index);

// The member `key` of `obj` (an object), or nullptr when absent.
const Json* Find(const Json& obj, std::string_view key);

// `value` (the field at `path`) has one of `kinds`.
Status ExpectKind(const Json& value, std::string_view path, unsigned kinds);
// obj[key], when present, has one of `kinds`.
Status Optional(const Json& obj, std::string_view parent, std::string_view key, unsigned kinds);
// obj[key] is present and has one of `kinds`.
Status Required(const Json& obj, std::string_view parent, std::string_view key, unsigned kinds);
// obj[key] is present and a non-empty string.
Status NonEmptyString(const Json& obj, std::string_view parent, std::string_view key);
// obj[key], when present and not null, is one of the strings `values`.
Status OneOf(const Json& obj, std::string_view parent, std::string_view key,
             std::initializer_list<std::string_view> values);
// obj[key], when present and not null, is an integer (2.0 counts) in [lo, hi].
Status IntegerIn(const Json& obj, std::string_view parent, std::string_view key, int64_t lo,
                 int64_t hi);
// obj[key], when present and not null, is a number in [lo, hi].
Status NumberIn(const Json& obj, std::string_view parent, std::string_view key, double lo,
                double hi);
// obj[key], a field this server cannot honour, is absent or inert: null, false, 0, "" or an
// empty container, what clients send by default and what changes nothing. Anything else is
// Unsupported ("'key' is not supported: <why>"): refused, never silently ignored.
Status NotHonoured(const Json& obj, std::string_view parent, std::string_view key,
                   std::string_view why);
// obj[key], when a string, nests no deeper than kMaxJsonDepth: strings the server parses
// as JSON (tool-call arguments) must be as bounded as the body they came in.
Status EmbeddedJson(const Json& obj, std::string_view parent, std::string_view key);

}  // namespace flashkv::schema
