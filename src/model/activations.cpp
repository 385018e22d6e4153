#include "model/activations.h"

#include <algorithm>

#include "util/memory_budget.h"

namespace flashkv {

Expected<Activations> Activations::Allocate(Backend& backend, const ModelConfig& c, int capacity,
                                            int logits_rows) {
  Activations a;
  a.capacity = capacity;
  a.logits_rows = logits_rows;
  const size_t T = size_t(capacity);
  int comp_width = 0;
  for (int l = 0; l < c.n_layer; ++l) {
    if (c.is_compressed(l)) comp_width = std::max(comp_width, c.compress_width(l));
    if (c.has_indexer(l)) comp_width = std::max(comp_width, c.indexer_compress_width());
  }
  // Every buffer once, for sizing and then for allocating.
  auto each = [&](auto&& f) -> Status {
    FLASHKV_RETURN_IF_ERROR(f(a.tokens, T));
    FLASHKV_RETURN_IF_ERROR(f(a.x_hc, T * c.hc_dim()));
    FLASHKV_RETURN_IF_ERROR(f(a.x_hc_next, T * c.hc_dim()));
    FLASHKV_RETURN_IF_ERROR(f(a.u, T * c.n_embd));
    FLASHKV_RETURN_IF_ERROR(f(a.xn, T * c.n_embd));
    FLASHKV_RETURN_IF_ERROR(f(a.post, T * c.n_hc));
    FLASHKV_RETURN_IF_ERROR(f(a.comb, T * c.n_hc * c.n_hc));
    FLASHKV_RETURN_IF_ERROR(f(a.q_lat, T * c.q_lora_rank));
    FLASHKV_RETURN_IF_ERROR(f(a.q, T * c.q_dim()));
    FLASHKV_RETURN_IF_ERROR(f(a.kv, T * c.head_dim));
    FLASHKV_RETURN_IF_ERROR(f(a.heads, T * c.q_dim()));
    FLASHKV_RETURN_IF_ERROR(f(a.low, T * c.n_out_group * c.o_lora_rank));
    FLASHKV_RETURN_IF_ERROR(f(a.sub_out, T * c.n_embd));
    FLASHKV_RETURN_IF_ERROR(f(a.comp_kv, T * comp_width));
    FLASHKV_RETURN_IF_ERROR(f(a.comp_score, T * comp_width));
    FLASHKV_RETURN_IF_ERROR(f(a.idx_q, T * c.indexer_q_dim()));
    FLASHKV_RETURN_IF_ERROR(f(a.idx_w, T * c.indexer_heads));
    FLASHKV_RETURN_IF_ERROR(f(a.idx_sel, T * c.indexer_top_k));
    FLASHKV_RETURN_IF_ERROR(f(a.router, T * c.n_expert));
    FLASHKV_RETURN_IF_ERROR(f(a.experts, T * c.n_expert_used));
    FLASHKV_RETURN_IF_ERROR(f(a.expert_w, T * c.n_expert_used));
    FLASHKV_RETURN_IF_ERROR(f(a.moe_out, T * c.n_embd));
    FLASHKV_RETURN_IF_ERROR(f(a.sh_gate, T * c.n_ff_exp));
    FLASHKV_RETURN_IF_ERROR(f(a.sh_up, T * c.n_ff_exp));
    FLASHKV_RETURN_IF_ERROR(f(a.sh_mid, T * c.n_ff_exp));
    FLASHKV_RETURN_IF_ERROR(f(a.y, T * c.n_embd));
    return f(a.logits, size_t(logits_rows) * c.n_vocab);
  };
  // The products above are of validated ints (ModelConfig bounds each dimension), so they
  // fit 64 bits; their sum is checked against memory before anything is allocated.
  ByteCount total;
  FLASHKV_RETURN_IF_ERROR(each([&](auto& ptr, size_t elems) -> Status {
    using Elem = std::remove_const_t<std::remove_pointer_t<decltype(ptr.get())>>;
    total.Add(std::max<size_t>(elems, 1), sizeof(Elem));
    return Status::Ok();
  }));
  FLASHKV_RETURN_IF_ERROR(
      CheckFitsInMemory(fmt::format("activations for chunks of {} tokens", capacity), total));
  FLASHKV_RETURN_IF_ERROR(each([&](auto& ptr, size_t elems) -> Status {
    using Elem = std::remove_const_t<std::remove_pointer_t<decltype(ptr.get())>>;
    auto buf = backend.Alloc(std::max<size_t>(elems, 1) * sizeof(Elem));
    if (!buf.ok()) return buf.status().WithContext("allocating activations");
    ptr = buf->template as<Elem>();
    a.storage.push_back(std::move(*buf));
    return Status::Ok();
  }));
  return a;
}

}  // namespace flashkv
