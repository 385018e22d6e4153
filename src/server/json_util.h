// JSON helpers for the API layer: parsing request bodies with a nesting limit and clear
// messages, typed field access that names the field at fault, and serialisation that
// never fails on the invalid UTF-8 a model can generate. Must not: know any API's fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/json_depth.h"
#include "util/status.h"
#include "util/work_budget.h"

namespace flashkv {

using Json = nlohmann::ordered_json;

// The body as a JSON object. InvalidArgument: "invalid JSON body: parse error …" (numbers
// beyond double's range too), "request body must be a JSON object", "JSON nesting deeper
// than 256 levels" (kMaxJsonDepth), "JSON body holds more than N values"
// (server/json_builder.h: time linear in the body, memory a bounded multiple of it).
// Strings must be valid UTF-8 (the parser rejects anything else). With a `budget`, every
// value is a step, and a spent budget ends the parse with its status.
Expected<Json> ParseJsonObject(std::string_view body, WorkBudget* budget = nullptr);

// Serialises with invalid UTF-8 replaced by U+FFFD (generated text may split characters).
std::string DumpJson(const Json& value);

// Typed optional fields: absent or null → nullopt; wrong type → InvalidArgument naming
// `key` and the expected type.
Expected<std::optional<std::string>> OptString(const Json& obj, std::string_view key);
Expected<std::optional<bool>> OptBool(const Json& obj, std::string_view key);
Expected<std::optional<double>> OptNumber(const Json& obj, std::string_view key);
// An integral number (2.0 accepted, 2.5 not) within [lo, hi].
Expected<std::optional<int64_t>> OptInt(const Json& obj, std::string_view key, int64_t lo,
                                        int64_t hi);

// The JSON type name for messages ("string", "array", ...).
const char* JsonTypeName(const Json& value);

}  // namespace flashkv
