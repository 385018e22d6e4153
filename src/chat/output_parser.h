// Turns the model's generated text back into structure, incrementally (docs/TOKENIZER.md "Output
// parsing"): the reasoning / content split at </think>, and DSML tool-call blocks into calls with
// JSON arguments. Feed it decoded text pieces as they stream (any split, even mid-marker); it
// returns events and holds back only the bytes that might be the start of a marker.
// Must not: tokenize, sample or stop generation itself (it reports ShouldStop()).
//
// Robustness: malformed DSML never fails the request. The block's raw text is returned as
// content (a kToolCallsInvalid event, then a kContent event with the raw text) and the
// calls of that block are dropped; an unterminated block at Finish() is reported the same
// way with unterminated_tool_block set.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace flashkv {

struct ChatEvent {
  enum class Kind {
    kReasoning,          // text: reasoning delta
    kContent,            // text: content delta
    kToolCallBegin,      // text: tool name; call_index
    kToolCallArguments,  // text: the next fragment of the arguments JSON; call_index
    kToolCallEnd,        // call_index; the call's arguments are complete
    kToolCallsInvalid,   // the current block was malformed: forget its calls (see above)
    kDone,               // from Finish(), last event
  };
  Kind kind;
  std::string text;
  int call_index = -1;  // 0-based over the whole output
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // compact JSON object text, {"k":v,...}
};

struct ParsedOutput {
  std::string reasoning;
  std::string content;  // text before the tool block, trailing whitespace trimmed
  std::vector<ParsedToolCall> tool_calls;
  // Exact bytes of the tool block(s) from the block start (with its leading "\n\n" when
  // present) to the end marker: what the replay map (docs/SERVER.md §4) replays.
  std::string raw_dsml;
  bool tool_block_complete = false;      // an end marker closed a well-formed block
  bool unterminated_tool_block = false;  // Finish() inside a block (finish reason "error")
  bool dsml_error = false;               // a block was malformed and became content
};

class OutputParser {
 public:
  // `thinking`: the prompt ended with <think>, so output starts as reasoning.
  // `tools_active`: the request offered tools; only then does a completed block ask to stop.
  OutputParser(bool thinking, bool tools_active);

  std::vector<ChatEvent> Feed(std::string_view text);
  // End of generation: releases held text, closes the stream with kDone.
  std::vector<ChatEvent> Finish();

  // A tool block has closed while tools are active: generation should stop now.
  bool ShouldStop() const { return tools_active_ && result_.tool_block_complete; }
  const ParsedOutput& result() const { return result_; }

 private:
  enum class State { kThinkStart, kReasoning, kContent, kBlock };
  // What the tool block parser is inside of.
  struct Block {
    std::string prefix;   // the variant's tag prefix: "｜DSML｜", "DSML｜" or ""
    std::string lead_ws;  // whitespace trimmed off the content before the block
    std::string raw;      // everything since the block start
    size_t pos = 0;       // parse cursor into raw: the next element starts here
    bool in_invoke = false;
    size_t params_in_call = 0;
    size_t first_call = 0;  // index of this block's first call in result_.tool_calls
    // A parameter whose opening tag ends at body_start and whose closing tag has not
    // arrived yet: where to resume looking for it, and the nesting depth so far.
    bool pending_param = false;
    size_t body_start = 0;
    size_t scan_from = 0;
    int depth = 0;
  };

  // Each returns true when it consumed something and should be called again.
  bool StepThinkStart(bool final, std::vector<ChatEvent>* ev);
  bool StepReasoning(bool final, std::vector<ChatEvent>* ev);
  bool StepContent(bool final, std::vector<ChatEvent>* ev);
  bool StepBlock(std::vector<ChatEvent>* ev);
  void Run(bool final, std::vector<ChatEvent>* ev);

  void EmitContent(std::string_view text, std::vector<ChatEvent>* ev);
  void EmitReasoning(std::string_view text, std::vector<ChatEvent>* ev);
  // Gives up on the current block at raw[fail_pos]: the text before becomes content, the
  // rest is scanned again as content.
  void AbandonBlock(size_t fail_pos, std::vector<ChatEvent>* ev);

  bool tools_active_;
  State state_;
  std::string buf_;  // received, not yet consumed text
  Block block_;
  ParsedOutput result_;
  bool finished_ = false;
};

}  // namespace flashkv
