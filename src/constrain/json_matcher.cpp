#include "constrain/json_matcher.h"

#include <algorithm>
#include <cstdint>

namespace flashkv {
namespace {

constexpr int64_t kMaxNumberBytes = 48;

bool IsDigit(uint8_t c) {
  return c >= '0' && c <= '9';
}
bool IsHex(uint8_t c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

using Kind = GrammarNode::Kind;

// Number states: 0 start, 1 after '-', 2 after a leading 0, 3 integer digits, 4 after '.',
// 5 fraction digits, 6 after 'e', 7 after the exponent's sign, 8 exponent digits.
bool NumberCanEnd(int state) {
  return state == 2 || state == 3 || state == 5 || state == 8;
}

}  // namespace

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> grammar) : g_(std::move(grammar)) {
  stack_.push_back(NewFrame(g_->root));
}

JsonMatcher::Frame JsonMatcher::NewFrame(int node) const {
  Frame f;
  f.node = node;
  const GrammarNode& n = g_->nodes[size_t(node)];
  if (n.kind == Kind::kLiterals) {
    f.alive = n.literals.size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << n.literals.size()) - 1;
  }
  return f;
}

bool JsonMatcher::StartsWith(int node, uint8_t c, int depth) const {
  const GrammarNode& n = g_->nodes[size_t(node)];
  switch (n.kind) {
    case Kind::kObject:
      return c == '{';
    case Kind::kArray:
      return c == '[';
    case Kind::kString:
      return c == '"';
    case Kind::kNumber:
    case Kind::kInteger:
      return c == '-' || IsDigit(c);
    case Kind::kLiterals:
      for (const std::string& l : n.literals) {
        if (!l.empty() && uint8_t(l[0]) == c) return true;
      }
      return false;
    case Kind::kUnion:
      if (depth > 16) return false;
      for (int a : n.alternatives) {
        if (StartsWith(a, c, depth + 1)) return true;
      }
      return false;
  }
  return false;
}

namespace {

bool RequiredFrom(const GrammarNode& n, int64_t from) {
  for (size_t k = size_t(from); k < n.properties.size(); ++k) {
    if (n.properties[k].required) return true;
  }
  return false;
}

}  // namespace

JsonMatcher::Step JsonMatcher::Advance(Frame& f, uint8_t c) {
  const GrammarNode& n = g_->nodes[size_t(f.node)];
  if (f.key || n.kind == Kind::kLiterals) {
    // Keys are matched against the object's property keys (quotes included).
    const size_t count = std::min<size_t>(f.key ? n.properties.size() : n.literals.size(), 64);
    auto lit = [&](size_t i) -> const std::string& {
      return f.key ? n.properties[i].key : n.literals[i];
    };
    uint64_t next = 0;
    bool complete = false;
    for (size_t i = 0; i < count; ++i) {
      if (!(f.alive >> i & 1)) continue;
      const std::string& l = lit(i);
      if (size_t(f.n) < l.size() && uint8_t(l[size_t(f.n)]) == c) next |= uint64_t(1) << i;
      if (size_t(f.n) == l.size()) complete = true;
    }
    if (next == 0) return complete ? Step::kDoneRetry : Step::kReject;
    f.alive = next;
    ++f.n;
    bool longer = false;
    bool whole = false;
    for (size_t i = 0; i < count; ++i) {
      if (!(next >> i & 1)) continue;
      if (lit(i).size() == size_t(f.n)) whole = true;
      if (lit(i).size() > size_t(f.n)) longer = true;
    }
    return whole && !longer ? Step::kDoneConsumed : Step::kConsumed;
  }
  switch (n.kind) {
    case Kind::kString:
      switch (f.state) {
        case 0:
          if (c != '"') return Step::kReject;
          f.state = 1;
          return Step::kConsumed;
        case 1: {
          if (f.a > 0) {  // inside a multi-byte character; f.alive: its lead byte
            uint8_t lo = 0x80, hi = 0xBF;
            // The first continuation byte: no overlong forms, surrogates or > U+10FFFF.
            if (f.alive == 0xE0) lo = 0xA0;
            if (f.alive == 0xED) hi = 0x9F;
            if (f.alive == 0xF0) lo = 0x90;
            if (f.alive == 0xF4) hi = 0x8F;
            if (c < lo || c > hi) return Step::kReject;
            f.alive = 0;
            --f.a;
            return Step::kConsumed;
          }
          if (c == '"') return f.n >= n.min_length ? Step::kDoneConsumed : Step::kReject;
          if (c < 0x20) return Step::kReject;
          if (n.max_length >= 0 && f.n >= n.max_length) return Step::kReject;
          if (c == '\\') {
            f.state = 2;
            return Step::kConsumed;
          }
          if (c >= 0x80) {
            f.alive = c;
            if (c >= 0xC2 && c <= 0xDF) {
              f.a = 1;
            } else if (c >= 0xE0 && c <= 0xEF) {
              f.a = 2;
            } else if (c >= 0xF0 && c <= 0xF4) {
              f.a = 3;
            } else {
              return Step::kReject;
            }
          }
          ++f.n;
          return Step::kConsumed;
        }
        case 2:
          if (c == 'u') {
            f.state = 3;
            f.a = 0;
            return Step::kConsumed;
          }
          if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' &&
              c != 't') {
            return Step::kReject;
          }
          ++f.n;
          f.state = 1;
          return Step::kConsumed;
        default:  // 3: \u hex digits
          if (!IsHex(c)) return Step::kReject;
          if (++f.a == 4) {
            ++f.n;
            f.a = 0;
            f.state = 1;
          }
          return Step::kConsumed;
      }
    case Kind::kNumber:
    case Kind::kInteger: {
      const bool integer = n.kind == Kind::kInteger;
      // Digits per part bounded so every value fits the usual parsers: an integer part
      // and a fraction of at most 18 digits (int64), an exponent of at most 2 (double).
      auto take = [&](int state) {
        f.a = state == f.state ? f.a + 1 : 1;
        const int64_t limit = state == 8 ? 2 : 18;
        if (f.a > limit || ++f.n > kMaxNumberBytes) return Step::kReject;
        f.state = state;
        return Step::kConsumed;
      };
      switch (f.state) {
        case 0:
          if (c == '-') return take(1);
          [[fallthrough]];
        case 1:
          if (c == '0') return take(2);
          if (IsDigit(c)) return take(3);
          return Step::kReject;
        case 2:
        case 3:
          if (f.state == 3 && IsDigit(c)) return take(3);
          if (!integer && c == '.') return take(4);
          if (!integer && (c == 'e' || c == 'E')) return take(6);
          return Step::kDoneRetry;
        case 4:
          return IsDigit(c) ? take(5) : Step::kReject;
        case 5:
          if (IsDigit(c)) return take(5);
          if (c == 'e' || c == 'E') return take(6);
          return Step::kDoneRetry;
        case 6:
          if (c == '+' || c == '-') return take(7);
          [[fallthrough]];
        case 7:
          return IsDigit(c) ? take(8) : Step::kReject;
        default:  // 8
          return IsDigit(c) ? take(8) : Step::kDoneRetry;
      }
    }
    case Kind::kObject: {
      auto key = [&]() {
        if (c != '"') return Step::kReject;
        f.state = 2;
        Frame k;
        if (n.any_keys) {
          k = NewFrame(g_->any_string);
        } else {
          // Properties in order: any from the next one up to and including the first
          // required one left.
          k.node = f.node;
          k.key = true;
          for (size_t j = size_t(f.n); j < n.properties.size() && j < 64; ++j) {
            k.alive |= uint64_t(1) << j;
            if (n.properties[j].required) break;
          }
          if (k.alive == 0) return Step::kReject;
        }
        pending_ = k;
        return Step::kRetryPush;
      };
      switch (f.state) {
        case 0:
          if (c != '{') return Step::kReject;
          f.state = 1;
          return Step::kConsumed;
        case 1:
          if (c == '}') {
            return !n.any_keys && RequiredFrom(n, 0) ? Step::kReject : Step::kDoneConsumed;
          }
          return key();
        case 2: {
          if (c != ':') return Step::kReject;
          f.state = 4;
          pending_ = NewFrame(n.any_keys ? g_->any_value : n.properties[size_t(f.a)].node);
          return Step::kConsumedPush;
        }
        case 4:
          if (c == ',') {
            if (!n.any_keys && size_t(f.n) >= n.properties.size()) return Step::kReject;
            f.state = 5;
            return Step::kConsumed;
          }
          if (c == '}') {
            return !n.any_keys && RequiredFrom(n, f.n) ? Step::kReject : Step::kDoneConsumed;
          }
          return Step::kReject;
        default:  // 5: a key after ','
          return key();
      }
    }
    case Kind::kArray:
      switch (f.state) {
        case 0:
          if (c != '[') return Step::kReject;
          f.state = 1;
          return Step::kConsumed;
        case 1:
          if (c == ']') return n.min_items == 0 ? Step::kDoneConsumed : Step::kReject;
          if (n.max_items == 0) return Step::kReject;
          f.state = 2;
          pending_ = NewFrame(n.items);
          return Step::kRetryPush;
        default:  // 2: after an item (f.n items so far)
          if (c == ',') {
            if (n.max_items >= 0 && f.n >= n.max_items) return Step::kReject;
            pending_ = NewFrame(n.items);
            return Step::kConsumedPush;
          }
          if (c == ']') return f.n >= n.min_items ? Step::kDoneConsumed : Step::kReject;
          return Step::kReject;
      }
    case Kind::kUnion:
      for (int a : n.alternatives) {
        if (StartsWith(a, c)) {
          f = NewFrame(a);
          return Step::kRetry;
        }
      }
      return Step::kReject;
    case Kind::kLiterals:
      break;  // handled above
  }
  return Step::kReject;
}

void JsonMatcher::ChildDone(const Frame& child) {
  Frame& parent = stack_.back();
  const GrammarNode& n = g_->nodes[size_t(parent.node)];
  if (n.kind == Kind::kArray) {
    ++parent.n;
  } else if (n.kind == Kind::kObject && child.key) {
    // The key that matched: the one alive whose whole text was read.
    for (size_t j = 0; j < n.properties.size() && j < 64; ++j) {
      if ((child.alive >> j & 1) && n.properties[j].key.size() == size_t(child.n)) {
        parent.a = int64_t(j);
        parent.n = int64_t(j) + 1;
        break;
      }
    }
  }
}

bool JsonMatcher::Feed(uint8_t c) {
  for (int guard = 0; guard < 64 && !stack_.empty(); ++guard) {
    Step s = Advance(stack_.back(), c);
    switch (s) {
      case Step::kConsumed:
        return true;
      case Step::kReject:
        return false;
      case Step::kRetry:
        continue;
      case Step::kRetryPush:
        if (!stack_.push_back(pending_)) return false;
        continue;
      case Step::kConsumedPush:
        return stack_.push_back(pending_);
      case Step::kDoneConsumed:
      case Step::kDoneRetry: {
        const Frame child = stack_.back();
        stack_.pop_back();
        if (!stack_.empty()) ChildDone(child);
        if (s == Step::kDoneConsumed) return true;
        if (stack_.empty()) return false;  // nothing may follow the value
        continue;
      }
    }
  }
  return false;
}

bool JsonMatcher::InPlainString(int64_t* room) const {
  if (stack_.empty()) return false;
  const Frame& f = stack_.back();
  if (f.key) return false;
  const GrammarNode& n = g_->nodes[size_t(f.node)];
  if (n.kind != Kind::kString || f.state != 1 || f.a != 0) return false;
  *room = n.max_length < 0 ? INT64_MAX : n.max_length - f.n;
  return true;
}

bool JsonMatcher::can_end() const {
  if (stack_.empty()) return true;
  if (stack_.size() != 1) return false;
  const Frame& f = stack_.back();
  const GrammarNode& n = g_->nodes[size_t(f.node)];
  if (n.kind == Kind::kNumber || n.kind == Kind::kInteger) return NumberCanEnd(f.state);
  if (n.kind == Kind::kLiterals && !f.key) {
    for (size_t i = 0; i < n.literals.size() && i < 64; ++i) {
      if ((f.alive >> i & 1) && n.literals[i].size() == size_t(f.n)) return true;
    }
  }
  return false;
}

}  // namespace flashkv
