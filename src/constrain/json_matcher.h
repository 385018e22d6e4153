// JsonMatcher: which bytes may come next in a JSON value of a JsonGrammar — a pushdown
// recognizer fed one byte at a time, cheap to copy so a token's bytes can be tried on a
// copy (token_constraint.h). Strings must be valid UTF-8 without control characters;
// numbers have at most 18 digits before and after the point and 2 in the exponent;
// values nest at most 32 deep. Must not: know tokens.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constrain/json_grammar.h"

namespace flashkv {

class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> grammar);

  // Consumes `c` when the value can go on with it. False when it cannot, and the matcher is
  // then spent: try bytes on a copy.
  bool Feed(uint8_t c);
  // The value is complete and nothing may follow.
  bool done() const { return stack_.empty(); }
  // The value could end here (complete, or a top-level number or literal that could also
  // go on).
  bool can_end() const;
  // Inside a string, between characters (no escape or multi-byte character open): true,
  // with how many more characters fit (INT64_MAX: no limit). Any run of characters without
  // '"', '\\' or control characters, whole UTF-8 characters, that fits is then accepted
  // (the token mask's fast path, token_constraint.h).
  bool InPlainString(int64_t* room) const;

 private:
  struct Frame {
    int node = -1;
    int state = 0;       // per kind (json_matcher.cpp)
    int64_t n = 0;       // characters, items, digits
    int64_t a = 0;       // UTF-8 continuation bytes left; \u digits; chosen property
    uint64_t alive = 0;  // literal / key candidates still matching
    bool key = false;    // a key of the object node `node` (literal over its property keys)
  };
  // What one frame did with a byte: consumed it; finished (with or without it: a number
  // ends at the first byte that cannot continue it, which its parent then reads); refused
  // it; became another frame (a union's pick) that reads it; or asked for `pending_` to be
  // pushed, then read it or not.
  enum class Step {
    kConsumed,
    kDoneConsumed,
    kDoneRetry,
    kReject,
    kRetry,
    kRetryPush,
    kConsumedPush
  };

  Step Advance(Frame& f, uint8_t c);
  void ChildDone(const Frame& child);
  bool StartsWith(int node, uint8_t c, int depth = 0) const;
  Frame NewFrame(int node) const;

  // The frames in use, inline: the token mask copies the matcher at every trie node, so a
  // copy moves only the frames in use and never allocates. Values nest at most kMaxDepth.
  static constexpr size_t kMaxDepth = 32;
  class Stack {
   public:
    Stack() = default;
    Stack(const Stack& o) : size_(o.size_) {
      std::copy_n(o.frames_.begin(), size_, frames_.begin());
    }
    Stack& operator=(const Stack& o) {
      size_ = o.size_;
      std::copy_n(o.frames_.begin(), size_, frames_.begin());
      return *this;
    }
    bool push_back(const Frame& f) {
      if (size_ == kMaxDepth) return false;
      frames_[size_++] = f;
      return true;
    }
    void pop_back() { --size_; }
    Frame& back() { return frames_[size_ - 1]; }
    const Frame& back() const { return frames_[size_ - 1]; }
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }

   private:
    std::array<Frame, kMaxDepth> frames_;
    size_t size_ = 0;
  };

  std::shared_ptr<const JsonGrammar> g_;
  Stack stack_;
  Frame pending_;  // the frame a Step::k*Push asks for
};

}  // namespace flashkv
