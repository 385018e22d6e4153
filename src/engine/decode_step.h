// The sampling decision of one decode step, shared by Engine::Generate and its tests:
// while the output is inside DSML tool-call structure the token is the argmax (docs/SERVER.md §5.5,
// also in thinking mode, whose fixed sampling would otherwise apply); string parameter
// bodies, JSON string values and everything outside a block use the request's sampler.
// Must not: evaluate the model or feed the output stream.
#pragma once

#include <cstdint>
#include <span>

#include "engine/output_stream.h"
#include "engine/sampler.h"

namespace flashkv {

// logits: [n_vocab]. The sampler's generator advances only when it draws, so the payload
// tokens of a seeded request do not depend on how many structure tokens came before.
int32_t PickNextToken(const OutputStream& output, Sampler& sampler, std::span<const float> logits);

}  // namespace flashkv
