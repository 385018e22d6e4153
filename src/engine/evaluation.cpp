#include "engine/evaluation.h"

#include <algorithm>

#include "engine/generation.h"

namespace flashkv {

Status CheckContextRoom(const GenerationRequest& request, int64_t prompt_ids, int64_t ctx) {
  const EvaluationOptions& e = request.eval;
  if (e.exact_length && request.max_tokens < 0) {
    return InvalidArgument("an exact decode length must be >= 0, got {}", request.max_tokens);
  }
  if (!e.exact_length) {
    // A reply needs at least one free position.
    if (prompt_ids < ctx) return Status::Ok();
    return ResourceExhausted("Prompt has {} tokens, but the configured context size is {} tokens",
                             prompt_ids, ctx);
  }
  // Every sampled id is evaluated but the last, which stays pending unless asked for.
  const int64_t n = request.max_tokens;
  const int64_t decode = e.evaluate_last ? n : std::max<int64_t>(n - 1, 0);
  if (prompt_ids + decode <= ctx) return Status::Ok();
  return ResourceExhausted(
      "Prompt has {} tokens and the decode evaluates {} more, but the configured context size "
      "is {} tokens",
      prompt_ids, decode, ctx);
}

Status CheckPromptIds(const GenerationRequest& request, int n_vocab) {
  const std::vector<int32_t>& ids = request.prompt_tokens;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab) {
      return InvalidArgument("token id {} at index {} is outside the vocabulary (0..{})", ids[i], i,
                             n_vocab - 1);
    }
  }
  return Status::Ok();
}

int64_t DecodeLimit(const GenerationRequest& request, int64_t room) {
  if (request.eval.exact_length) return request.max_tokens;
  return request.max_tokens > 0 ? std::min<int64_t>(request.max_tokens, room) : room;
}

bool EosEndsDecode(const GenerationRequest& request) {
  return !request.eval.exact_length;
}

namespace {

std::vector<float>* KeptRows(const GenerationRequest& request, bool decoding) {
  return decoding ? request.eval.decode_logits : request.eval.prompt_logits;
}

}  // namespace

void KeepSampledRow(const GenerationRequest& request, std::span<const float> logits) {
  std::vector<float>* rows = request.eval.sampled_logits;
  if (rows != nullptr) rows->insert(rows->end(), logits.begin(), logits.end());
}

float* KeptLogitsRows(const GenerationRequest& request, bool decoding, size_t n, int n_vocab) {
  std::vector<float>* rows = KeptRows(request, decoding);
  if (rows == nullptr) return nullptr;
  const size_t at = rows->size();
  rows->resize(at + n * size_t(n_vocab));
  return rows->data() + at;
}

void CopyLastKeptRow(const GenerationRequest& request, bool decoding, std::span<float> logits) {
  const std::vector<float>* rows = KeptRows(request, decoding);
  if (rows == nullptr || rows->size() < logits.size()) return;
  std::copy(rows->end() - ptrdiff_t(logits.size()), rows->end(), logits.begin());
}

}  // namespace flashkv
