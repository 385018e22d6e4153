#include "model/activations.h"

#include <algorithm>

#include "util/memory_budget.h"

namespace flashkv {

namespace {

// Every per-token buffer of Activations, as a member pointer with its elements per token
// (the logits, sized by logits_rows, are apart): one list for allocating and for RowView.
template <class F>
Status ForEachTokenBuffer(const ModelConfig& c, F&& f) {
  size_t comp_width = 0;
  bool any_indexer = false;
  for (int l = 0; l < c.n_layer; ++l) {
    if (c.is_compressed(l)) comp_width = std::max<size_t>(comp_width, c.compress_width(l));
    any_indexer |= c.has_indexer(l);
  }
  const size_t idx_width = any_indexer ? c.indexer_compress_width() : 0;
  using A = Activations;
  FLASHKV_RETURN_IF_ERROR(f(&A::tokens, 1));
  FLASHKV_RETURN_IF_ERROR(f(&A::positions, 1));
  FLASHKV_RETURN_IF_ERROR(f(&A::x_hc, c.hc_dim()));
  FLASHKV_RETURN_IF_ERROR(f(&A::x_hc_next, c.hc_dim()));
  FLASHKV_RETURN_IF_ERROR(f(&A::u, c.n_embd));
  FLASHKV_RETURN_IF_ERROR(f(&A::xn, c.n_embd));
  FLASHKV_RETURN_IF_ERROR(f(&A::post, c.n_hc));
  FLASHKV_RETURN_IF_ERROR(f(&A::comb, size_t(c.n_hc) * c.n_hc));
  FLASHKV_RETURN_IF_ERROR(f(&A::q_lat, c.q_lora_rank));
  FLASHKV_RETURN_IF_ERROR(f(&A::q, c.q_dim()));
  FLASHKV_RETURN_IF_ERROR(f(&A::kv, c.head_dim));
  FLASHKV_RETURN_IF_ERROR(f(&A::heads, c.q_dim()));
  FLASHKV_RETURN_IF_ERROR(f(&A::low, size_t(c.n_out_group) * c.o_lora_rank));
  FLASHKV_RETURN_IF_ERROR(f(&A::sub_out, c.n_embd));
  FLASHKV_RETURN_IF_ERROR(f(&A::comp_kv, comp_width));
  FLASHKV_RETURN_IF_ERROR(f(&A::comp_score, comp_width));
  FLASHKV_RETURN_IF_ERROR(f(&A::idx_comp_kv, idx_width));
  FLASHKV_RETURN_IF_ERROR(f(&A::idx_comp_score, idx_width));
  FLASHKV_RETURN_IF_ERROR(f(&A::idx_q, c.indexer_q_dim()));
  FLASHKV_RETURN_IF_ERROR(f(&A::idx_w, c.indexer_heads));
  FLASHKV_RETURN_IF_ERROR(f(&A::idx_sel, c.indexer_top_k));
  FLASHKV_RETURN_IF_ERROR(f(&A::router, c.n_expert));
  FLASHKV_RETURN_IF_ERROR(f(&A::experts, c.n_expert_used));
  FLASHKV_RETURN_IF_ERROR(f(&A::expert_w, c.n_expert_used));
  FLASHKV_RETURN_IF_ERROR(f(&A::moe_out, c.n_embd));
  FLASHKV_RETURN_IF_ERROR(f(&A::sh_gate, c.n_ff_exp));
  FLASHKV_RETURN_IF_ERROR(f(&A::sh_up, c.n_ff_exp));
  FLASHKV_RETURN_IF_ERROR(f(&A::sh_mid, c.n_ff_exp));
  return f(&A::y, c.n_embd);
}

}  // namespace

Expected<Activations> Activations::Allocate(Backend& backend, const ModelConfig& c, int capacity,
                                            int logits_rows) {
  Activations a;
  a.capacity = capacity;
  a.logits_rows = logits_rows;
  const size_t T = size_t(capacity);
  // Every buffer once, for sizing and then for allocating.
  auto each = [&](auto&& f) -> Status {
    FLASHKV_RETURN_IF_ERROR(ForEachTokenBuffer(
        c, [&](auto member, size_t per_token) { return f(a.*member, T * per_token); }));
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

Activations Activations::RowView(const ModelConfig& c, int row0) const {
  Activations v;
  v.capacity = capacity - row0;
  const Status s = ForEachTokenBuffer(c, [&](auto member, size_t per_token) {
    v.*member = this->*member + size_t(row0) * per_token;
    return Status::Ok();
  });
  (void)s;  // the callback cannot fail
  v.comp_kv = {};
  v.comp_score = {};
  v.logits = logits;
  v.logits_rows = logits_rows;
  return v;
}

}  // namespace flashkv
