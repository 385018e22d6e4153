#include "engine/decode_step.h"

namespace flashkv {

int32_t PickNextToken(const OutputStream& output, Sampler& sampler, std::span<const float> logits) {
  if (output.in_tool_syntax()) return Sampler::Greedy(logits, sampler.exclude_id());
  return sampler.Sample(logits);
}

}  // namespace flashkv
