// The per-request data of the engine: what to generate (GenerationRequest), what streams
// back while it runs (GenerationEvent) and how it ended (GenerationResult). Must not: know
// HTTP dialects (server/ turns events into each API's shapes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/chat_message.h"
#include "chat/output_parser.h"
#include "chat/prompt_renderer.h"
#include "constrain/json_grammar.h"
#include "engine/engine_metrics.h"
#include "engine/evaluation.h"
#include "engine/request_timing.h"
#include "engine/sampler.h"
#include "util/status.h"

namespace flashkv {

enum class OutputMode {
  kChat,  // split reasoning / content / DSML tool calls (chat, Responses, Anthropic)
  kRaw,   // the generated text as is (/v1/completions)
};

struct GenerationRequest {
  std::string prompt_text;             // the rendered DS4 prompt: the byte-prefix key
  std::vector<int32_t> prompt_tokens;  // Encode(prompt_text, specials): the token key
  OutputMode output = OutputMode::kChat;
  bool thinking = false;      // the prompt ends with <think>: output starts as reasoning
  bool tools_active = false;  // a finished tool block ends generation (finish tool_calls)
  std::string tool_id_prefix = "call_";  // ids of the calls the model makes: "call_"/"toolu_"
  int max_tokens = 0;                    // generated tokens at most; <= 0: to the context end
  std::vector<std::string> stop;         // stop sequences over the generated text
  SamplerOptions sampling;
  // Log-probabilities of each sampled token (< 0: none), with this many most likely
  // alternatives (0..20): the APIs' logprobs / top_logprobs.
  int logprobs = -1;
  // Structured output: every token must continue a JSON value of this grammar (null:
  // none); generation ends when the value is complete.
  std::shared_ptr<const JsonGrammar> constraint;
  // The constraint holds only until its value is complete, then the output is free (a
  // forced tool call's opening: the model writes the call itself). Special tokens count.
  bool constraint_prefix = false;
  // The conversation the prompt was rendered from, so the worker can key the session by
  // the text the client will resend next turn (visible keys). Empty for completions.
  std::vector<ChatMessage> history;
  PromptOptions prompt_options;
  // Whether this client resends reasoning with its history (the server reads it from the
  // request). Picks which visible key a disk snapshot of the session is filed under.
  bool replays_reasoning = true;
  // For the commands that evaluate the model (engine/evaluation.h); off for a reply.
  EvaluationOptions eval;
};

// One sampled token's log-probability (engine/sampler.h LogprobsOf) with its bytes, as the
// APIs report it. A token's bytes may be part of a UTF-8 character.
struct TokenLogprob {
  std::string token;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // most likely first
  bool reasoning = false;  // sampled while the reasoning was open (</think> included)
};

enum class FinishReason {
  kStop,       // EOS or a stop sequence
  kLength,     // max_tokens or the end of the context
  kToolCalls,  // a tool-call block closed
  kError,      // an unterminated tool block or a failed forward pass after streaming began
  kCancelled,  // the client went away or the server is shutting down
};
const char* FinishReasonName(FinishReason reason);  // OpenAI spelling; "cancelled"

// How the prompt was resumed; known when the worker starts the request.
struct CacheInfo {
  CacheSource source = CacheSource::kNone;
  std::string detail;          // "memory-token", "memory-text", "memory-visible", "", ...
  int64_t prompt_tokens = 0;   // the effective prompt: reused + evaluated ids
  int64_t cached_tokens = 0;   // ids reused without evaluation
  double restore_ms = 0;       // RAM or disk restore time (0 otherwise)
  uint64_t restore_bytes = 0;  // bytes the restore moved into the state
  std::string origin;          // the file a disk hit came from
};

struct GenerationResult {
  FinishReason finish = FinishReason::kStop;
  std::string text;     // everything generated and kept (stop sequences cut), raw bytes
  ParsedOutput parsed;  // kChat: reasoning, content, tool calls, raw DSML
  std::vector<std::string> tool_call_ids;  // one per parsed.tool_calls, as streamed
  std::string stop_sequence;               // the stop sequence that ended it, if any
  CacheInfo cache;
  std::vector<int32_t> ids;            // every sampled id, in order (a final EOS included)
  std::vector<TokenLogprob> logprobs;  // request.logprobs >= 0: each sampled id but an ending EOS
  int64_t completion_tokens = 0;       // sampled tokens (reasoning and DSML included)
  int64_t reasoning_tokens = 0;        // of those, the ones before </think> closed (it included)
  RequestTiming timing;
  RewindTiming rewind;  // with eval.rewind
  std::string error;    // why, when finish is kError
};

struct GenerationEvent {
  enum class Kind {
    kStarted,  // cache: the resume decision; prefill follows
    kPrefill,  // done/total: prompt ids evaluated so far
    kChat,     // chat: a parsed delta; tool_call_id set on kToolCallBegin
    kText,     // text: a raw delta (OutputMode::kRaw)
    kDone,     // result: the last event of a request that ran
    kError,    // error: the request could not run (nothing was generated)
  };
  Kind kind = Kind::kText;
  CacheInfo cache;
  int64_t done = 0;
  int64_t total = 0;
  ChatEvent chat{ChatEvent::Kind::kContent, {}, -1};
  std::string tool_call_id;
  std::string text;
  // kChat / kText, when the request asked for logprobs: the tokens sampled since the last
  // event that carried some (bytes held back, e.g. by the stop matcher, arrive later, so
  // these need not match this event's text). The result holds them all.
  std::vector<TokenLogprob> logprobs;
  std::shared_ptr<const GenerationResult> result;
  Status error;
};

}  // namespace flashkv
