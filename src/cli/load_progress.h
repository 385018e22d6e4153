// LoadReporter: the progress of a model load where each audience sees it — a bar on a
// terminal (util/progress.h), a log line every 10% of the weights with the rate, and an
// optional sink (serve's StartupGate, which /health reports). Exists because an 81 GB load
// takes minutes and looked frozen. Must not: load anything itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "model/model_weights.h"
#include "util/progress.h"

namespace flashkv::cli {

class LoadReporter {
 public:
  using Sink = std::function<void(const std::string& phase, double fraction)>;
  explicit LoadReporter(Sink sink = {});
  ~LoadReporter();

  // A coarse step of the start-up ("reading the model file", "opening the KV cache") and the
  // overall fraction reached when it begins.
  void Phase(const std::string& phase, double fraction);
  // The callback for Runtime's weights load: bytes placed are mapped onto [from, to] of the
  // overall fraction. The reporter must outlive the load.
  LoadProgressFn Weights(double from, double to);

 private:
  void OnWeights(uint64_t done, uint64_t total, double from, double to);

  Sink sink_;
  std::unique_ptr<Progress> bar_;
  int logged_decile_ = 0;
  uint64_t drawn_mib_ = 0;
  std::chrono::steady_clock::time_point weights_start_;
};

}  // namespace flashkv::cli
