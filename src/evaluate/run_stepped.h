// RunStepped: one request run to its end on the calling thread, which is then the engine's
// worker, with each event handed over between steps (a progress line sees every prefill
// chunk as it ends, not after the request). Shared by the commands that evaluate the model
// through the engine. Must not: print or interpret the events beyond their end.
#pragma once

#include <functional>
#include <memory>

#include "engine/engine.h"
#include "engine/request_handle.h"
#include "util/status.h"

namespace flashkv {

// The request's result, or its error (a kError event, or a result that finished with
// kError: its message as kInternal). `on_event` sees every event, the last included.
Expected<std::shared_ptr<const GenerationResult>> RunStepped(
    Engine& engine, RequestHandle& handle,
    const std::function<void(const GenerationEvent&)>& on_event = {});

}  // namespace flashkv
