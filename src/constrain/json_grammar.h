// JsonGrammar: the JSON values a request's structured-output schema allows, compiled once
// per request into a graph of nodes that JsonMatcher (json_matcher.h) walks byte by byte.
// Supported: `type` (one or a list), `properties` / `required` (an object's properties
// appear in declaration order, optional ones may be left out, no other keys), `items`,
// `minItems` / `maxItems`, `minLength` / `maxLength`, `enum`, `const`, `anyOf` whose
// alternatives start differently (a string or null), `$ref` into `$defs` / `definitions`
// (recursion included); annotations (`title`, `description`, `default`, `examples`,
// `$schema`, `$id`, `strict`) are ignored. Every other keyword (`pattern`, `format`,
// `minimum`, `oneOf`, ...) is refused by name rather than ignored: an output that does not
// validate must not come back as if it did. Output is compact JSON (no whitespace).
// Must not: know tokens (token_constraint.h maps them) or HTTP.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace flashkv {

struct GrammarNode {
  enum class Kind {
    kObject,    // properties in order; any_keys: free string keys with any values
    kArray,     // items (a node), min_items..max_items
    kString,    // min_length..max_length characters
    kNumber,    // JSON number
    kInteger,   // JSON number without fraction or exponent
    kLiterals,  // one of `literals` (compact JSON texts): enum, const, true/false, null
    kUnion,     // one of `alternatives`, picked by the first byte
  };
  Kind kind = Kind::kLiterals;
  struct Property {
    std::string key;  // the key as JSON text, quotes included
    int node = -1;
    bool required = false;
  };
  std::vector<Property> properties;
  bool any_keys = false;
  int items = -1;
  int64_t min_items = 0;
  int64_t max_items = -1;  // < 0: unbounded
  int64_t min_length = 0;
  int64_t max_length = -1;  // < 0: unbounded
  std::vector<std::string> literals;
  std::vector<int> alternatives;
};

struct JsonGrammar {
  std::vector<GrammarNode> nodes;
  int root = -1;
  int any_value = -1;   // the node of any JSON value
  int any_string = -1;  // a string without limits (free object keys)
};

// `schema`: a JSON Schema object. InvalidArgument / Unsupported naming the keyword and its
// path ("'properties.age.minimum' is not supported").
Expected<std::shared_ptr<const JsonGrammar>> CompileJsonSchema(
    const nlohmann::ordered_json& schema);

// Any JSON object (response_format json_object).
std::shared_ptr<const JsonGrammar> AnyJsonObjectGrammar();

// Exactly one of `texts` (1 to 64, none a prefix of another): the opening of a forced tool
// call, whatever follows it being free (GenerationRequest::constraint_prefix).
Expected<std::shared_ptr<const JsonGrammar>> OneOfTextsGrammar(std::vector<std::string> texts);

}  // namespace flashkv
