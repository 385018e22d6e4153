// RouteMoeBlock: the router step of a MoE block (router logits, then the top-k choice and
// weights) on one backend. One place for it because the expert-parallel path
// (model/sharded_moe.cpp) routes on the home backend exactly as Backend::MoeBlock
// (backend/coarse_ops.cpp) does, so both give the same experts and weights.
#pragma once

#include "backend/backend.h"

namespace flashkv {

inline void RouteMoeBlock(Backend& be, const MoeBlockArgs& a) {
  be.MatMul(*a.router, a.x, a.n_tokens, a.logits, a.aq);
  RouterArgs route;
  route.logits = a.logits;
  route.bias = a.router_bias;
  route.tid2eid = a.tid2eid;
  route.tokens = a.tokens;
  route.selected = a.selected;
  route.weights = a.weights;
  route.n_tokens = a.n_tokens;
  route.n_expert = int(a.router->ne[1]);
  route.n_used = a.n_used;
  route.weight_scale = a.weight_scale;
  be.RouterSelect(route);
}

}  // namespace flashkv
