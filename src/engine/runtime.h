// Runtime: the objects one process needs to run a model — the thread pool, the backend
// (CPU, or CUDA when this build has it) and the loaded Model — built in dependency order
// and torn down in reverse. Used by the CLI commands (logits, run, bench) and the server.
// Must not: hold sequences (KvState and sessions are the caller's).
#pragma once

#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace flashkv {

struct RuntimeOptions {
  std::string model_path;
  std::string backend = "cpu";          // "cpu" | "cuda"
  int threads = 0;                      // <= 0: one per core (CPU backend and host work)
  const ModelOptions* model = nullptr;  // null: DefaultModelOptions for the file
};

class Runtime {
 public:
  static Expected<std::unique_ptr<Runtime>> Open(const RuntimeOptions& options);

  ThreadPool& pool() { return pool_; }
  Backend& backend() { return *backend_; }
  Model& model() { return *model_; }

  // Whether `name` can be opened by this build ("cpu" always; "cuda" when compiled in).
  static bool HasBackend(const std::string& name);

 private:
  explicit Runtime(int threads) : pool_(threads) {}

  // Declaration order is construction order: the backend uses the pool, the model the
  // backend.
  ThreadPool pool_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

}  // namespace flashkv
