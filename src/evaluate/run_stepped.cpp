#include "evaluate/run_stepped.h"

#include <chrono>
#include <optional>

namespace flashkv {

Expected<std::shared_ptr<const GenerationResult>> RunStepped(
    Engine& engine, RequestHandle& handle,
    const std::function<void(const GenerationEvent&)>& on_event) {
  std::shared_ptr<const GenerationResult> result;
  Status failed;
  auto drain = [&] {
    while (std::optional<GenerationEvent> ev = handle.Next(std::chrono::milliseconds(0))) {
      if (on_event) on_event(*ev);
      if (ev->kind == GenerationEvent::Kind::kDone) result = ev->result;
      if (ev->kind == GenerationEvent::Kind::kError) failed = ev->error;
    }
  };
  engine.Admit(handle);
  drain();
  while (!engine.idle()) {
    engine.Step();
    drain();
  }
  if (!failed.ok()) return failed;
  if (!result) return Internal("the engine ended the request without a result");
  if (result->finish == FinishReason::kError) return Internal("{}", result->error);
  return result;
}

}  // namespace flashkv
