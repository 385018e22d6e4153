// A linear-time, bounded JSON parse into Json (nlohmann::ordered_json), for request
// bodies. ordered_json keeps an object's keys in a vector and its own parser inserts each
// key after a linear search for a duplicate: an object of n keys cost O(n²) (80k keys:
// 16.6 s of CPU for a 0.87 MB body, issue 34). Here nlohmann's SAX parser feeds a builder
// that appends keys directly and finds duplicates through a hash index (built only for
// objects past a few keys), with nlohmann's meaning kept: the last value of a duplicated
// key wins, in the first one's place. Every value is counted: a body of more than
// `max_values` values (63 MiB of `[{},{},…]` is 21 million, ~1.7 GB as a DOM) is refused
// before it is built, so a parse costs a bounded multiple of the body's size.
// Must not: know any API's fields.
#pragma once

#include <cstddef>
#include <string_view>

#include "server/json_util.h"
#include "util/work_budget.h"

namespace flashkv {

// The most values (objects, arrays, strings, numbers, literals) one request body may hold.
inline constexpr size_t kMaxJsonValues = size_t(1) << 20;

// What a parse cost, in steps that do not depend on the machine (tests).
struct JsonBuildWork {
  uint64_t values = 0;
  uint64_t key_steps = 0;  // key comparisons and index lookups/inserts for duplicates
};

// `text` as one JSON value; InvalidArgument "invalid JSON body: …" as Json::parse words it,
// or "JSON body holds more than N values"; with a `budget` (one step per value), its status
// once it is spent.
Expected<Json> BuildJson(std::string_view text, size_t max_values = kMaxJsonValues,
                         JsonBuildWork* work = nullptr, WorkBudget* budget = nullptr);

}  // namespace flashkv
