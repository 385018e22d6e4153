#include "util/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace flashkv {

bool Progress::StderrIsTty() {
  return isatty(STDERR_FILENO) == 1;
}

Progress::Progress(std::string what, uint64_t total, std::string unit)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      tty_(StderrIsTty()),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  Finish();
}

void Progress::Update(uint64_t done, const std::string& detail) {
  if (!tty_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const std::string line = Line(what_, done, total_, unit_, secs, detail);
  std::fprintf(stderr, "\r%s\033[K", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

std::string Progress::Line(const std::string& what, uint64_t done, uint64_t total,
                           const std::string& unit, double secs, const std::string& detail) {
  const double pct = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
  constexpr int kWidth = 30;
  std::string bar(static_cast<size_t>(pct / 100.0 * kWidth), '#');
  bar.resize(kWidth, '.');
  std::string rate;
  if (secs >= kMinRateSeconds && !unit.empty()) {
    rate = fmt::format(" {:.1f} {}/s", static_cast<double>(done) / secs, unit);
  }
  std::string line =
      fmt::format("{} [{}] {:5.1f}% {}/{}{} {}", what, bar, pct, done, total, rate, detail);
  if (line.size() > 159) line.resize(159);
  return line;
}

void Progress::Finish() {
  if (tty_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  drawn_ = false;
}

}  // namespace flashkv
