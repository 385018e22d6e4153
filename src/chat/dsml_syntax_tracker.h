// DsmlSyntaxTracker: where the model's output currently is with respect to DSML tool-call
// syntax, updated as each decoded piece arrives, so the decode loop can pick the next
// token's sampling (docs/SERVER.md §5.5: tags, attributes and JSON punctuation are decoded
// greedily; string parameter bodies and JSON string values use the request's sampling). Must not:
// build calls or events (output_parser.h does), sample, or hold text back.
//
// Why not OutputParser: the parser sees text only after the stop-sequence matcher has
// released it (it may hold bytes back for a while), but the sampling decision must reflect
// every byte already generated. This recognizer is forgiving, not a validator: it follows
// the same tag names and variants as the parser (docs/TOKENIZER.md "Output parsing"), and where the
// parser would give a block up (text that is no DSML element), it goes back to looking for a block
// start.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flashkv {

enum class DsmlSyntaxState {
  kOutside,     // reasoning or content: the request's sampling
  kStructure,   // inside a tool-call block, in or between tags (also a partial closing tag)
  kStringBody,  // the body of a string parameter: the request's sampling
  kJsonValue,   // a string="false" body outside JSON strings (punctuation, numbers, literals)
  kJsonString,  // inside a JSON string of a string="false" body: the request's sampling
};

// Whether the next token is decoded as argmax.
inline bool IsGreedySyntax(DsmlSyntaxState s) {
  return s == DsmlSyntaxState::kStructure || s == DsmlSyntaxState::kJsonValue;
}

class DsmlSyntaxTracker {
 public:
  // `thinking`: output starts as reasoning; blocks are looked for only after </think>
  // (DSML inside reasoning is not executable).
  explicit DsmlSyntaxTracker(bool thinking);

  // Appends generated text (any split).
  void Feed(std::string_view text);
  DsmlSyntaxState state() const { return state_; }

 private:
  enum class Mode { kThink, kSearch, kStructure, kStringBody, kJson };
  // Each consumes what it can of buf_ from pos_; true when the mode changed and the loop
  // should run again.
  bool StepThink();
  bool StepSearch();
  bool StepStructure();
  bool StepStringBody();
  bool StepJson();
  // Forgets buf_ before pos_ minus `keep` bytes (nothing after it is looked back at).
  void Trim(size_t keep);

  Mode mode_;
  DsmlSyntaxState state_ = DsmlSyntaxState::kOutside;
  std::string buf_;
  size_t pos_ = 0;
  std::string prefix_;  // the block's tag prefix: "｜DSML｜", "DSML｜" or ""
  bool json_in_string_ = false;
  bool json_escaped_ = false;
};

}  // namespace flashkv
