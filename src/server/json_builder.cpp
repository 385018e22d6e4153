#include "server/json_builder.h"

#include <cmath>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace flashkv {
namespace {

// Objects up to this many keys find a duplicate by a scan; larger ones through an index.
constexpr size_t kScanKeys = 16;

class DomBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  DomBuilder(size_t max_values, WorkBudget* budget) : max_values_(max_values), budget_(budget) {}

  bool null() { return Place(Json(nullptr)) != nullptr; }
  bool boolean(bool v) { return Place(Json(v)) != nullptr; }
  bool number_integer(number_integer_t v) { return Place(Json(v)) != nullptr; }
  bool number_unsigned(number_unsigned_t v) { return Place(Json(v)) != nullptr; }
  bool number_float(number_float_t v, const string_t& text) {
    if (!std::isfinite(v)) {
      error_ = "number overflow parsing '" + text + "'";  // as Json::parse says it
      return false;
    }
    return Place(Json(v)) != nullptr;
  }
  bool string(string_t& v) { return Place(Json(std::move(v))) != nullptr; }
  bool binary(binary_t& v) { return Place(Json::binary(std::move(v))) != nullptr; }
  bool start_object(std::size_t) { return Open(Json::object()); }
  bool key(string_t& k) {
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }

  Json& root() { return root_; }
  const std::string& error() const { return error_; }
  bool too_many() const { return too_many_; }
  bool spent() const { return budget_ != nullptr && !budget_->ok(); }
  JsonBuildWork work() const { return JsonBuildWork{count_, key_steps_}; }

 private:
  struct Frame {
    Json* value = nullptr;
    std::string key;  // objects: the key of the next value
    std::unique_ptr<std::unordered_map<std::string, size_t>> index;  // large objects
  };

  bool Open(Json&& container) {
    Json* slot = Place(std::move(container));
    if (slot == nullptr) return false;
    stack_.push_back(Frame{slot, {}, nullptr});
    return true;
  }

  // Puts `v` where the parse is (the root, the open array's end, the open object's key)
  // and returns where it went; null past the value budget.
  Json* Place(Json&& v) {
    if (++count_ > max_values_) {
      too_many_ = true;
      return nullptr;
    }
    if (budget_ != nullptr && !budget_->Step()) return nullptr;
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.value->is_array()) {
      Json::array_t& a = f.value->get_ref<Json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    auto& keys = static_cast<Json::object_t::Container&>(f.value->get_ref<Json::object_t&>());
    size_t at = keys.size();
    if (keys.size() < kScanKeys) {
      for (size_t i = 0; i < keys.size(); ++i) {
        if (keys[i].first == f.key) at = i;
      }
      key_steps_ += keys.size();
    } else {
      if (!f.index) {
        f.index = std::make_unique<std::unordered_map<std::string, size_t>>();
        for (size_t i = 0; i < keys.size(); ++i) f.index->emplace(keys[i].first, i);
        key_steps_ += keys.size();
      }
      if (auto it = f.index->find(f.key); it != f.index->end()) at = it->second;
      ++key_steps_;
    }
    if (at < keys.size()) {
      keys[at].second = std::move(v);  // a duplicate: the last value, the first place
      return &keys[at].second;
    }
    if (f.index) {
      f.index->emplace(f.key, keys.size());
      ++key_steps_;
    }
    keys.emplace_back(std::move(f.key), std::move(v));
    return &keys.back().second;
  }

  const size_t max_values_;
  WorkBudget* const budget_;
  size_t count_ = 0;
  uint64_t key_steps_ = 0;
  bool too_many_ = false;
  std::string error_;
  Json root_;
  std::vector<Frame> stack_;
};

}  // namespace

Expected<Json> BuildJson(std::string_view text, size_t max_values, JsonBuildWork* work,
                         WorkBudget* budget) {
  DomBuilder builder(max_values, budget);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const Json::exception& e) {
    return InvalidArgument("invalid JSON body: {}", e.what());
  }
  if (work != nullptr) *work = builder.work();
  if (builder.too_many()) {
    return InvalidArgument("JSON body holds more than {} values", max_values);
  }
  if (builder.spent()) return budget->status();
  if (!ok) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: …": the text after
    // the tag.
    std::string what = builder.error();
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    return InvalidArgument("invalid JSON body: {}", what);
  }
  return std::move(builder.root());
}

}  // namespace flashkv
