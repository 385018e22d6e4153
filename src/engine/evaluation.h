// EvaluationOptions: what a request may ask of the engine beyond a reply, for the commands
// that measure or check the model itself (logits, bench, check-vectors): kept logits rows
// (evaluated, or sampled from), a decode of exactly max_tokens steps that EOS does not end,
// a sampler that never picks EOS, the last decoded id evaluated too, and a probe after
// which the session is back at the end of its prompt. Also the rules that read them, so the
// engine's resume, step and decode code each ask in one call. Must not: run the model or
// touch sessions (engine_steps.cpp and rewind_point.h do).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/status.h"

namespace flashkv {

struct GenerationRequest;

struct EvaluationOptions {
  // Appended to, n_vocab floats a row, in order: the logits of every prompt id the request
  // evaluates (not of those a resume reused), and of every decode id it evaluates. One
  // vector may take both (prompt rows, then decode rows). The caller keeps them alive, and
  // leaves them alone, until the request's last event.
  std::vector<float>* prompt_logits = nullptr;
  std::vector<float>* decode_logits = nullptr;
  // Appended to: the row each decode id is sampled from (the first: the logits after the
  // prompt), n_vocab floats a row — what a caller comparing distributions step by step reads.
  std::vector<float>* sampled_logits = nullptr;
  // The decode is exactly max_tokens steps (0: none, never "to the context end"), and a
  // sampled EOS is fed on like any id instead of ending it. The context then only has to
  // hold the prompt and the decode ids evaluated (it may be filled to its last position).
  bool exact_length = false;
  bool never_eos = false;      // the sampler never picks EOS (a probe that runs its length)
  bool evaluate_last = false;  // the last decoded id is evaluated too, not left pending
  // A probe: the state at the end of the prompt is kept as an in-memory snapshot while the
  // decode runs and put back when it ends, so the next request continues the prompt, not
  // the probe. What that cost is in GenerationResult::rewind.
  bool rewind = false;
};

// What a rewind cost: the snapshot image of the prompt's end, its capture (copy out of the
// backend + CRCs) and its restore (CRC check + copy back); neither is in the decode time.
struct RewindTiming {
  uint64_t snapshot_bytes = 0;
  double save_ms = 0;
  double restore_ms = 0;
};

// The resume step's context check: kResourceExhausted when `prompt_ids` (the effective
// prompt: reused + to evaluate) leave no room for the request in `ctx` tokens. Without
// exact_length a prompt must leave at least one free position; with it, the prompt and
// the decode ids that get evaluated must fit. kInvalidArgument for a negative exact length.
Status CheckContextRoom(const GenerationRequest& request, int64_t prompt_ids, int64_t ctx);

// Every prompt id inside a vocabulary of `n_vocab` (ids-only requests do not come through
// the tokenizer): kInvalidArgument naming the first that is not, before a session is
// touched.
Status CheckPromptIds(const GenerationRequest& request, int n_vocab);

// Most tokens the decode samples when the prompt is read, with `room` positions left.
int64_t DecodeLimit(const GenerationRequest& request, int64_t room);

// Whether a sampled EOS ends the decode.
bool EosEndsDecode(const GenerationRequest& request);

// Before a decode id is sampled from `logits`: keeps that row when the request asks.
void KeepSampledRow(const GenerationRequest& request, std::span<const float> logits);

// Where a step writes the logits of a request's next `n` rows (`decoding`: decode rows,
// else prompt rows): the new tail of the vector that keeps them, grown by n rows, or null
// when the request keeps no such rows.
float* KeptLogitsRows(const GenerationRequest& request, bool decoding, size_t n, int n_vocab);
// After such a step: the last kept row into `logits` (the session's next-token row).
void CopyLastKeptRow(const GenerationRequest& request, bool decoding, std::span<float> logits);

}  // namespace flashkv
