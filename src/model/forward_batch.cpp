// One forward step over the chunks of one or more sessions (docs/DESIGN.md "Batching"), read
// top to bottom: embed every row → for each layer: attention sublayer (row-wise projections
// over all rows, positions / KV / attention per session), FFN sublayer (all rows) → each
// session's state advanced → HC head, norm, lm head over the rows that want logits.
#include <algorithm>
#include <utility>

#include "model/chunk_context.h"
#include "model/model.h"
#include "model/sharded_moe.h"
#include "model/step_scratch.h"

namespace flashkv {
namespace {

// Rows of the chunk that get logits.
int LogitRows(const SessionChunk& c) {
  switch (c.logits_for) {
    case LogitsFor::kAll:
      return int(c.tokens.size());
    case LogitsFor::kLast:
      return 1;
    case LogitsFor::kNone:
      break;
  }
  return 0;
}

}  // namespace

Model::~Model() = default;

Status Model::ForwardBatch(std::span<const SessionChunk> chunks) {
  if (!step_) step_ = std::make_unique<StepScratch>();
  std::vector<SessionChunk>& run = step_->chunks;
  run.clear();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const SessionChunk& c = chunks[i];
    if (c.state == nullptr) return InvalidArgument("batch chunk {} has no KvState", i);
    for (size_t j = 0; j < i; ++j) {
      if (chunks[j].state == c.state) {
        return InvalidArgument("batch chunk {} repeats the KvState of chunk {}", i, j);
      }
    }
    if (c.logits_for != LogitsFor::kNone && c.logits == nullptr && !c.tokens.empty()) {
      return InvalidArgument("batch chunk {} asks for logits but has no buffer for them", i);
    }
    Status s = CheckChunk(c.tokens, *c.state);
    if (!s.ok()) return s.WithContext(fmt::format("batch chunk {}", i));
    if (!c.tokens.empty()) run.push_back(c);
  }
  if (run.empty()) return Status::Ok();
  return RunStep(run);
}

Status Model::RunStep(std::span<const SessionChunk> chunks) {
  if (!step_) step_ = std::make_unique<StepScratch>();
  StepScratch& k = *step_;
  const int V = config_.n_vocab;
  const int hc_dim = config_.hc_dim();

  // Rows: each chunk's tokens in chunk order. Logits rows: each chunk's asked-for rows,
  // also in chunk order.
  int rows = 0;
  int logit_rows = 0;
  for (const SessionChunk& ch : chunks) {
    rows += int(ch.tokens.size());
    logit_rows += LogitRows(ch);
  }
  FLASHKV_RETURN_IF_ERROR(EnsureActivations(rows, std::max(logit_rows, 1)));
  // Trades cold cached experts for hot ones between steps, before this step's first op.
  if (cache_) FLASHKV_RETURN_IF_ERROR(cache_->BeforeStep());
  // A prefill-sized step copies each layer's uncached experts ahead of its MoE block.
  const bool staged = cache_ && cache_->Staging(rows);
  if (staged) FLASHKV_RETURN_IF_ERROR(cache_->BeginStagedStep());
  // A decode-sized step copies the experts it chose from host memory inside each MoE block.
  const bool gathered = cache_ && !staged && cache_->Gathering(rows);
  if (gathered) cache_->BeginGatherStep();

  // Every row's token and its position in its session: the row-wise RoPE of a layer reads
  // the positions, so the rows of all sessions rotate in one call.
  k.tokens.clear();
  k.positions.clear();
  for (const SessionChunk& ch : chunks) {
    k.tokens.insert(k.tokens.end(), ch.tokens.begin(), ch.tokens.end());
    for (int64_t i = 0; i < int64_t(ch.tokens.size()); ++i) {
      k.positions.push_back(ch.state->n_tokens() + i);
    }
  }
  const HostCopy inputs[] = {{act_.tokens, k.tokens.data(), sizeof(int32_t) * size_t(rows)},
                             {act_.positions, k.positions.data(), sizeof(int64_t) * size_t(rows)}};
  FLASHKV_RETURN_IF_ERROR(backend_.WriteMany(inputs, 2));

  // Each session sees its rows of the activations as a chunk of its own.
  std::vector<Activations>& views = k.views;
  std::vector<ChunkContext>& sessions = k.sessions;
  sessions.clear();  // before the views it refers to
  views.clear();
  views.reserve(chunks.size());  // the contexts hold references into it
  int row0 = 0;
  for (const SessionChunk& ch : chunks) {
    views.push_back(act_.RowView(config_, row0));
    sessions.push_back(ChunkContext{backend_, config_, options_, weights_, views.back(), act_,
                                    *ch.state, main_rope_, compress_rope_, MakeHcParams(config_),
                                    ch.state->n_tokens(), int(ch.tokens.size()), row0});
    row0 += int(ch.tokens.size());
  }
  StepContext step{backend_, config_,  options_,    weights_,   act_,     MakeHcParams(config_),
                   rows,     sessions, k.attention, k.compress, k.stores, k.finish};
  step.experts = experts_.get();
  step.cache = cache_.get();
  step.staged_experts = staged;
  step.gathered_experts = gathered;

  // X = embedding broadcast to n_hc streams
  EmbedRows(step);

  for (int l = 0; l < config_.n_layer; ++l) {
    AttentionSublayer(step, l);
    std::swap(act_.x_hc, act_.x_hc_next);
    if (staged) FLASHKV_RETURN_IF_ERROR(cache_->BeforeStagedFfn(l));
    FfnSublayer(step, l);
    if (staged) FLASHKV_RETURN_IF_ERROR(cache_->AfterStagedFfn(l));
    std::swap(act_.x_hc, act_.x_hc_next);
    if (observer_) {
      observer_buf_.resize(size_t(rows) * hc_dim);
      FLASHKV_RETURN_IF_ERROR(
          backend_.Read(act_.x_hc, observer_buf_.data(), observer_buf_.size() * sizeof(float)));
      for (const ChunkContext& c : sessions) {
        observer_(l, c.pos0, c.n_tokens, observer_buf_.data() + size_t(c.row0) * hc_dim);
      }
    }
  }
  // A failed shard fails the step before its tokens are appended (its in-place KV writes
  // may be partial: the caller drops the state, as after a device error).
  if (experts_) FLASHKV_RETURN_IF_ERROR(experts_->TakeError());
  for (const ChunkContext& c : sessions) c.kv.Advance(c.n_tokens);

  if (logit_rows == 0) return backend_.Synchronize();

  // The head's input: the asked-for rows, in chunk order. When they are one run of rows (one
  // session, or decode rows that all want logits) the head reads them in place; otherwise
  // the runs are copied together into x_hc_next, free after the last layer.
  std::vector<std::pair<int, int>>& runs = k.runs;
  runs.clear();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int n = LogitRows(chunks[i]);
    if (n == 0) continue;
    const int first = sessions[i].row0 + sessions[i].n_tokens - n;  // the chunk's last n rows
    if (!runs.empty() && runs.back().first + runs.back().second == first) {
      runs.back().second += n;
    } else {
      runs.emplace_back(first, n);
    }
  }
  DevPtr<const float> head_in = act_.x_hc + size_t(runs[0].first) * hc_dim;
  if (runs.size() > 1) {
    size_t at = 0;
    for (auto [first, n] : runs) {
      backend_.Copy(act_.x_hc + size_t(first) * hc_dim, act_.x_hc_next + at * hc_dim,
                    size_t(n) * hc_dim);
      at += size_t(n);
    }
    head_in = act_.x_hc_next;
  }
  OutputHead(step, head_in, logit_rows);

  std::vector<HostCopy>& copies = k.copies;
  copies.clear();
  size_t at = 0;
  for (const SessionChunk& ch : chunks) {
    const size_t n = size_t(LogitRows(ch));
    if (n == 0) continue;
    copies.push_back(HostCopy{act_.logits + at * V, ch.logits, sizeof(float) * n * V});
    at += n;
  }
  return backend_.ReadMany(copies.data(), copies.size());
}

}  // namespace flashkv
