#include "evaluate/vector_case_runner.h"

#include <algorithm>
#include <vector>

#include "engine/engine.h"
#include "evaluate/run_stepped.h"
#include "tools/vector_runner.h"

namespace flashkv {

Expected<CaseVerdict> RunVectorCase(const VectorCase& c, const Tokenizer& tokenizer, Model* model,
                                    const VectorRunOptions& options) {
  if (model == nullptr) return CheckVectorPrompt(c, tokenizer);
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, VectorPromptTokens(c, tokenizer));
  const int n_prompt = static_cast<int>(tokens.size());
  const int n_vocab = model->config().n_vocab;
  if (static_cast<size_t>(n_vocab) > tokenizer.vocab_size())
    return InvalidArgument("model vocabulary ({}) is larger than its tokenizer's ({})", n_vocab,
                           tokenizer.vocab_size());
  const int steps = static_cast<int>(c.steps.size());

  EngineOptions eo;
  eo.ctx_size = n_prompt + steps + 1;
  eo.live_sessions = 1;
  eo.prefill_chunk = std::max(1, options.prefill_chunk > 0 ? options.prefill_chunk : n_prompt);
  eo.max_batch = 1;
  EngineMetrics metrics;
  ToolReplayMap replay;
  Engine engine(*model, tokenizer, replay, metrics, eo);

  // The recorded steps, greedy, each chosen from the row kept for it.
  std::vector<float> rows;
  rows.reserve(static_cast<size_t>(steps) * static_cast<size_t>(n_vocab));
  GenerationRequest req;
  req.prompt_tokens = std::move(tokens);
  req.output = OutputMode::kRaw;
  req.max_tokens = steps;
  req.eval.exact_length = true;
  req.eval.sampled_logits = &rows;
  RequestHandle handle(std::move(req));
  auto ran = RunStepped(engine, handle, [&](const GenerationEvent& ev) {
    if (ev.kind == GenerationEvent::Kind::kPrefill && options.on_prefill) {
      options.on_prefill(ev.done, ev.total);
    }
  });
  if (!ran.ok()) return ran.status();
  const std::vector<EngineStep> ours = VectorSteps(c, tokenizer, rows, n_vocab, options.top_k);
  return CompareVectorCase(c, n_prompt, ours, /*check_steps=*/true);
}

}  // namespace flashkv
