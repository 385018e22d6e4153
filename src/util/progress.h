// A one-line progress display for long work (prefill, convert, bench). Draws only when
// stderr is a terminal, so logs and CI output stay clean; redraws at most ~10 times/s.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace flashkv {

class Progress {
 public:
  // `what` names the work ("prefill", "convert"); `total` is in `unit`s.
  Progress(std::string what, uint64_t total, std::string unit = "");
  ~Progress();

  // Sets the amount done; `detail` is appended to the line (e.g. a tensor name).
  void Update(uint64_t done, const std::string& detail = "");
  // Clears the line. Called by the destructor too.
  void Finish();

  static bool StderrIsTty();

  // The line Update draws (without the carriage return). The rate appears once `secs` has
  // reached kMinRateSeconds: before that a few small items give rates like "331578947.4
  // MiB/s" (the weights bar of every start-up; cli/load_progress.cpp logs by the same rule).
  static constexpr double kMinRateSeconds = 0.5;
  static std::string Line(const std::string& what, uint64_t done, uint64_t total,
                          const std::string& unit, double secs, const std::string& detail);

 private:
  std::string what_;
  std::string unit_;
  uint64_t total_;
  bool tty_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace flashkv
