// OutputStream: generated text → one request's events, in the order the client sees them:
// invalid UTF-8 substituted (clients get, and resend, valid UTF-8), stop sequences cut, and
// in chat mode the incremental parser's reasoning / content / tool-call deltas, each new
// tool call given a fresh unguessable id. Separate from the decode loop so the tool-call
// path can be driven with exact text in tests. Also tracks, from every byte generated so
// far, whether the next token is DSML tool-call syntax (decoded greedily, docs/SERVER.md §5.5).
// Must not: sample, touch sessions or know HTTP.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/dsml_syntax_tracker.h"
#include "chat/output_parser.h"
#include "engine/generation.h"
#include "engine/stop_matcher.h"

namespace flashkv {

class OutputStream {
 public:
  // Uses request.output, thinking, tools_active, tool_id_prefix and stop.
  explicit OutputStream(const GenerationRequest& request);

  // Appends decoded bytes (any split that keeps valid characters whole, as StreamDecoder
  // gives); returns the events they complete.
  std::vector<GenerationEvent> Feed(std::string_view raw);
  // End of generation: releases held text and closes the parser.
  std::vector<GenerationEvent> Finish();

  // A stop sequence matched: generation must end (finish stop).
  bool stopped() const { return stops_.stopped(); }
  // A tool block closed while tools are active: generation must end (finish tool_calls).
  bool tool_block_closed() const { return parser_ && parser_->ShouldStop(); }
  // Chat output with tools active, inside DSML structure (tags, attributes, JSON
  // punctuation): the next token is the argmax. Reflects all text fed so far, including
  // bytes the stop matcher or the parser still hold back.
  bool in_tool_syntax() const { return syntax_ && IsGreedySyntax(syntax_->state()); }
  DsmlSyntaxState syntax_state() const {
    return syntax_ ? syntax_->state() : DsmlSyntaxState::kOutside;
  }
  // Chat output of a thinking prompt whose </think> has not been generated yet: the next
  // token is reasoning (usage counts it). From the bytes fed, ahead of anything held back.
  bool reasoning_open() const { return reasoning_open_; }

  // After Finish: the result's text, parsed output, tool-call ids and stop sequence, and
  // the finish reason adjusted for what the text turned out to be (`finish` is the
  // decode loop's reason).
  void Complete(FinishReason finish, GenerationResult* result) const;

 private:
  std::vector<GenerationEvent> Process(std::string kept, bool final);

  std::string tool_id_prefix_;
  StopMatcher stops_;
  std::optional<OutputParser> parser_;
  std::optional<DsmlSyntaxTracker> syntax_;  // kChat with tools active
  std::string text_;                         // kept text so far
  std::vector<std::string> call_ids_;        // by call index
  bool reasoning_open_ = false;
  std::string think_tail_;  // the last bytes fed, for a </think> split across pieces
  bool finished_ = false;
};

}  // namespace flashkv
