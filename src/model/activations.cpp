#include "model/activations.h"

#include <algorithm>

namespace flashkv {

Expected<Activations> Activations::Allocate(Backend& backend, const ModelConfig& c, int capacity,
                                            int logits_rows) {
  Activations a;
  a.capacity = capacity;
  a.logits_rows = logits_rows;
  const size_t T = size_t(capacity);
  auto alloc = [&](auto& ptr, size_t elems) -> Status {
    using Elem = std::remove_const_t<std::remove_pointer_t<decltype(ptr.get())>>;
    auto buf = backend.Alloc(std::max<size_t>(elems, 1) * sizeof(Elem));
    if (!buf.ok()) return buf.status().WithContext("allocating activations");
    ptr = buf->template as<Elem>();
    a.storage.push_back(std::move(*buf));
    return Status::Ok();
  };
  int comp_width = 0;
  for (int l = 0; l < c.n_layer; ++l) {
    if (c.is_compressed(l)) comp_width = std::max(comp_width, c.compress_width(l));
    if (c.has_indexer(l)) comp_width = std::max(comp_width, c.indexer_compress_width());
  }
  FLASHKV_RETURN_IF_ERROR(alloc(a.tokens, T));
  FLASHKV_RETURN_IF_ERROR(alloc(a.x_hc, T * c.hc_dim()));
  FLASHKV_RETURN_IF_ERROR(alloc(a.x_hc_next, T * c.hc_dim()));
  FLASHKV_RETURN_IF_ERROR(alloc(a.u, T * c.n_embd));
  FLASHKV_RETURN_IF_ERROR(alloc(a.xn, T * c.n_embd));
  FLASHKV_RETURN_IF_ERROR(alloc(a.post, T * c.n_hc));
  FLASHKV_RETURN_IF_ERROR(alloc(a.comb, T * c.n_hc * c.n_hc));
  FLASHKV_RETURN_IF_ERROR(alloc(a.q_lat, T * c.q_lora_rank));
  FLASHKV_RETURN_IF_ERROR(alloc(a.q, T * c.q_dim()));
  FLASHKV_RETURN_IF_ERROR(alloc(a.kv, T * c.head_dim));
  FLASHKV_RETURN_IF_ERROR(alloc(a.heads, T * c.q_dim()));
  FLASHKV_RETURN_IF_ERROR(alloc(a.low, T * c.n_out_group * c.o_lora_rank));
  FLASHKV_RETURN_IF_ERROR(alloc(a.sub_out, T * c.n_embd));
  FLASHKV_RETURN_IF_ERROR(alloc(a.comp_kv, T * comp_width));
  FLASHKV_RETURN_IF_ERROR(alloc(a.comp_score, T * comp_width));
  FLASHKV_RETURN_IF_ERROR(alloc(a.idx_q, T * c.indexer_q_dim()));
  FLASHKV_RETURN_IF_ERROR(alloc(a.idx_w, T * c.indexer_heads));
  FLASHKV_RETURN_IF_ERROR(alloc(a.idx_sel, T * c.indexer_top_k));
  FLASHKV_RETURN_IF_ERROR(alloc(a.router, T * c.n_expert));
  FLASHKV_RETURN_IF_ERROR(alloc(a.experts, T * c.n_expert_used));
  FLASHKV_RETURN_IF_ERROR(alloc(a.expert_w, T * c.n_expert_used));
  FLASHKV_RETURN_IF_ERROR(alloc(a.moe_out, T * c.n_embd));
  FLASHKV_RETURN_IF_ERROR(alloc(a.sh_gate, T * c.n_ff_exp));
  FLASHKV_RETURN_IF_ERROR(alloc(a.sh_up, T * c.n_ff_exp));
  FLASHKV_RETURN_IF_ERROR(alloc(a.sh_mid, T * c.n_ff_exp));
  FLASHKV_RETURN_IF_ERROR(alloc(a.y, T * c.n_embd));
  FLASHKV_RETURN_IF_ERROR(alloc(a.logits, size_t(logits_rows) * c.n_vocab));
  return a;
}

}  // namespace flashkv
