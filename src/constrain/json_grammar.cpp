#include "constrain/json_grammar.h"

#include <map>
#include <set>

namespace flashkv {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxLiterals = 64;  // JsonMatcher keeps the live ones in a 64-bit mask
constexpr size_t kMaxProperties = 64;
constexpr int kMaxNodes = 4096;

std::string At(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// The first bytes a node's values can start with (anyOf alternatives must not share one).
std::set<char> FirstBytes(const JsonGrammar& g, int node, int depth = 0) {
  const GrammarNode& n = g.nodes[size_t(node)];
  switch (n.kind) {
    case GrammarNode::Kind::kObject:
      return {'{'};
    case GrammarNode::Kind::kArray:
      return {'['};
    case GrammarNode::Kind::kString:
      return {'"'};
    case GrammarNode::Kind::kNumber:
    case GrammarNode::Kind::kInteger:
      return {'-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'};
    case GrammarNode::Kind::kLiterals: {
      std::set<char> out;
      for (const std::string& l : n.literals) out.insert(l[0]);
      return out;
    }
    case GrammarNode::Kind::kUnion: {
      std::set<char> out;
      if (depth > 8) return out;
      for (int a : n.alternatives) {
        for (char c : FirstBytes(g, a, depth + 1)) out.insert(c);
      }
      return out;
    }
  }
  return {};
}

class Compiler {
 public:
  explicit Compiler(const json& root) : root_(root) {}

  Expected<std::shared_ptr<const JsonGrammar>> Run() {
    g_ = std::make_shared<JsonGrammar>();
    g_->any_value = AnyValue();
    FLASHKV_ASSIGN_OR_RETURN(g_->root, Compile(root_, ""));
    return std::shared_ptr<const JsonGrammar>(std::move(g_));
  }

  std::shared_ptr<const JsonGrammar> AnyObject() {
    g_ = std::make_shared<JsonGrammar>();
    g_->any_value = AnyValue();
    g_->root = any_object_;
    return std::move(g_);
  }

 private:
  int Add(GrammarNode n) {
    g_->nodes.push_back(std::move(n));
    return int(g_->nodes.size()) - 1;
  }
  int Literals(std::vector<std::string> literals) {
    GrammarNode n;
    n.kind = GrammarNode::Kind::kLiterals;
    n.literals = std::move(literals);
    return Add(std::move(n));
  }
  int Simple(GrammarNode::Kind kind) {
    GrammarNode n;
    n.kind = kind;
    return Add(std::move(n));
  }

  // Any JSON value: a union of the six kinds; objects and arrays of it.
  int AnyValue() {
    const int any = Simple(GrammarNode::Kind::kUnion);
    GrammarNode obj;
    obj.kind = GrammarNode::Kind::kObject;
    obj.any_keys = true;
    any_object_ = Add(std::move(obj));
    GrammarNode arr;
    arr.kind = GrammarNode::Kind::kArray;
    arr.items = any;
    const int array = Add(std::move(arr));
    const int str = Simple(GrammarNode::Kind::kString);
    const int num = Simple(GrammarNode::Kind::kNumber);
    const int lit = Literals({"true", "false", "null"});
    g_->nodes[size_t(any)].alternatives = {any_object_, array, str, num, lit};
    g_->any_string = str;
    return any;
  }

  Expected<int> Compile(const json& s, const std::string& path) {
    if (int(g_->nodes.size()) > kMaxNodes) return Unsupported("the schema is too large");
    if (s.is_boolean()) {
      if (s.get<bool>()) return g_->any_value;
      return Unsupported("'{}' is false: no value can match", path.empty() ? "schema" : path);
    }
    if (!s.is_object()) {
      return InvalidArgument("'{}' must be a schema object", path.empty() ? "schema" : path);
    }
    static const std::set<std::string> kIgnored = {
        "title",  "description", "default",     "examples",   "$schema",  "$id",      "$comment",
        "strict", "$defs",       "definitions", "deprecated", "readOnly", "writeOnly"};
    static const std::set<std::string> kHandled = {
        "type",      "properties", "required", "additionalProperties",
        "items",     "minItems",   "maxItems", "minLength",
        "maxLength", "enum",       "const",    "anyOf",
        "$ref",      "nullable"};
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (kIgnored.count(it.key()) == 0 && kHandled.count(it.key()) == 0) {
        return Unsupported("'{}' is not supported in a response schema", At(path, it.key()));
      }
    }
    if (auto ref = s.find("$ref"); ref != s.end()) return Ref(*ref, At(path, "$ref"));
    if (auto c = s.find("const"); c != s.end()) return Literals({c->dump()});
    if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array() || e->empty() || e->size() > kMaxLiterals) {
        return Unsupported("'{}' must be an array of 1 to {} values", At(path, "enum"),
                           kMaxLiterals);
      }
      std::vector<std::string> lits;
      for (const json& v : *e) lits.push_back(v.dump());
      return Literals(std::move(lits));
    }
    if (auto any = s.find("anyOf"); any != s.end()) {
      if (!any->is_array() || any->empty()) {
        return InvalidArgument("'{}' must be a non-empty array", At(path, "anyOf"));
      }
      std::vector<int> alts;
      for (size_t i = 0; i < any->size(); ++i) {
        FLASHKV_ASSIGN_OR_RETURN(int a,
                                 Compile((*any)[i], At(path, "anyOf[" + std::to_string(i) + "]")));
        alts.push_back(a);
      }
      return Union(std::move(alts), At(path, "anyOf"));
    }
    auto type = s.find("type");
    if (type == s.end()) {
      // No type: what the other keywords describe, else any value.
      if (s.contains("properties")) return Object(s, path);
      if (s.contains("items")) return Array(s, path);
      return g_->any_value;
    }
    std::vector<std::string> types;
    if (type->is_string()) {
      types.push_back(type->get<std::string>());
    } else if (type->is_array()) {
      for (const json& t : *type) {
        if (!t.is_string()) return InvalidArgument("'{}' must hold strings", At(path, "type"));
        types.push_back(t.get<std::string>());
      }
    } else {
      return InvalidArgument("'{}' must be a string or an array", At(path, "type"));
    }
    if (s.value("nullable", false)) types.push_back("null");
    std::vector<int> alts;
    for (const std::string& t : types) {
      FLASHKV_ASSIGN_OR_RETURN(int a, OfType(s, t, path));
      alts.push_back(a);
    }
    if (alts.size() == 1) return alts[0];
    return Union(std::move(alts), At(path, "type"));
  }

  Expected<int> OfType(const json& s, const std::string& t, const std::string& path) {
    if (t == "object") return Object(s, path);
    if (t == "array") return Array(s, path);
    if (t == "string") {
      GrammarNode n;
      n.kind = GrammarNode::Kind::kString;
      FLASHKV_ASSIGN_OR_RETURN(n.min_length, Count(s, "minLength", path, 0));
      FLASHKV_ASSIGN_OR_RETURN(n.max_length, Count(s, "maxLength", path, -1));
      return Add(std::move(n));
    }
    if (t == "number") return Simple(GrammarNode::Kind::kNumber);
    if (t == "integer") return Simple(GrammarNode::Kind::kInteger);
    if (t == "boolean") return Literals({"true", "false"});
    if (t == "null") return Literals({"null"});
    return InvalidArgument("'{}' \"{}\" is not a JSON Schema type", At(path, "type"), t);
  }

  Expected<int64_t> Count(const json& s, const char* key, const std::string& path, int64_t dflt) {
    auto it = s.find(key);
    if (it == s.end()) return dflt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return InvalidArgument("'{}' must be a non-negative integer", At(path, key));
    }
    return it->get<int64_t>();
  }

  Expected<int> Object(const json& s, const std::string& path) {
    GrammarNode n;
    n.kind = GrammarNode::Kind::kObject;
    auto props = s.find("properties");
    if (props == s.end() || props->empty()) {
      // No declared properties: any object (additionalProperties false: only {}).
      auto extra = s.find("additionalProperties");
      if (extra != s.end() && extra->is_boolean() && !extra->get<bool>()) {
        return Literals({"{}"});
      }
      return any_object_;
    }
    if (!props->is_object()) {
      return InvalidArgument("'{}' must be an object", At(path, "properties"));
    }
    if (props->size() > kMaxProperties) {
      return Unsupported("'{}' has more than {} properties", At(path, "properties"),
                         kMaxProperties);
    }
    std::set<std::string> required;
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) return InvalidArgument("'{}' must be an array", At(path, "required"));
      for (const json& k : *r) {
        if (!k.is_string()) return InvalidArgument("'{}' must hold strings", At(path, "required"));
        if (!props->contains(k.get<std::string>())) {
          return Unsupported("'{}' names \"{}\", which is not in 'properties'",
                             At(path, "required"), k.get<std::string>());
        }
        required.insert(k.get<std::string>());
      }
    }
    const int self = Add(GrammarNode{});  // reserved: properties may refer back through $ref
    // In declaration order, as the client wrote them (and as OpenAI's strict mode emits).
    for (auto it = props->begin(); it != props->end(); ++it) {
      FLASHKV_ASSIGN_OR_RETURN(int child,
                               Compile(it.value(), At(At(path, "properties"), it.key())));
      n.properties.push_back({json(it.key()).dump(), child, required.count(it.key()) > 0});
    }
    g_->nodes[size_t(self)] = std::move(n);
    return self;
  }

  Expected<int> Array(const json& s, const std::string& path) {
    GrammarNode n;
    n.kind = GrammarNode::Kind::kArray;
    n.items = g_->any_value;
    FLASHKV_ASSIGN_OR_RETURN(n.min_items, Count(s, "minItems", path, 0));
    FLASHKV_ASSIGN_OR_RETURN(n.max_items, Count(s, "maxItems", path, -1));
    if (n.max_items >= 0 && n.max_items < n.min_items) {
      return Unsupported("'{}' is below 'minItems': no array can match", At(path, "maxItems"));
    }
    const int self = Add(GrammarNode{});
    if (auto items = s.find("items"); items != s.end()) {
      FLASHKV_ASSIGN_OR_RETURN(n.items, Compile(*items, At(path, "items")));
    }
    g_->nodes[size_t(self)] = std::move(n);
    return self;
  }

  Expected<int> Union(std::vector<int> alts, const std::string& path) {
    std::set<char> seen;
    for (int a : alts) {
      for (char c : FirstBytes(*g_, a)) {
        if (!seen.insert(c).second) {
          return Unsupported(
              "'{}': alternatives must start differently (e.g. a string or null); two can "
              "start with '{}'",
              path, std::string(1, c));
        }
      }
    }
    GrammarNode n;
    n.kind = GrammarNode::Kind::kUnion;
    n.alternatives = std::move(alts);
    return Add(std::move(n));
  }

  // "#/$defs/Name" or "#/definitions/Name" (or "#": the root), compiled once.
  Expected<int> Ref(const json& ref, const std::string& path) {
    if (!ref.is_string()) return InvalidArgument("'{}' must be a string", path);
    const std::string r = ref.get<std::string>();
    if (auto it = refs_.find(r); it != refs_.end()) return it->second;
    const json* target = nullptr;
    if (r == "#") {
      target = &root_;
    } else {
      for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        const std::string p = prefix;
        if (r.rfind(p, 0) != 0) continue;
        const std::string container = p.substr(2, p.size() - 3);
        auto defs = root_.find(container);
        if (defs != root_.end() && defs->is_object()) {
          auto def = defs->find(r.substr(p.size()));
          if (def != defs->end()) target = &*def;
        }
      }
    }
    if (target == nullptr) return Unsupported("'{}' \"{}\" does not resolve", path, r);
    // A placeholder union of one, filled once the target is compiled, so a recursive
    // reference finds it.
    const int slot = Add(GrammarNode{});
    g_->nodes[size_t(slot)].kind = GrammarNode::Kind::kUnion;
    refs_[r] = slot;
    FLASHKV_ASSIGN_OR_RETURN(int node, Compile(*target, r));
    g_->nodes[size_t(slot)].alternatives = {node};
    return slot;
  }

  const json& root_;
  std::shared_ptr<JsonGrammar> g_;
  int any_object_ = -1;
  std::map<std::string, int> refs_;
};

}  // namespace

Expected<std::shared_ptr<const JsonGrammar>> CompileJsonSchema(
    const nlohmann::ordered_json& schema) {
  return Compiler(schema).Run();
}

std::shared_ptr<const JsonGrammar> AnyJsonObjectGrammar() {
  static const nlohmann::ordered_json kEmpty = nlohmann::ordered_json::object();
  return Compiler(kEmpty).AnyObject();
}

Expected<std::shared_ptr<const JsonGrammar>> OneOfTextsGrammar(std::vector<std::string> texts) {
  if (texts.empty() || texts.size() > kMaxLiterals) {
    return Unsupported("between 1 and {} choices are supported, not {}", kMaxLiterals,
                       texts.size());
  }
  for (const std::string& t : texts) {
    if (t.empty()) return InvalidArgument("an empty choice");
  }
  auto g = std::make_shared<JsonGrammar>();
  GrammarNode n;
  n.kind = GrammarNode::Kind::kLiterals;
  n.literals = std::move(texts);
  g->nodes.push_back(std::move(n));
  g->root = 0;
  return std::shared_ptr<const JsonGrammar>(std::move(g));
}

}  // namespace flashkv
