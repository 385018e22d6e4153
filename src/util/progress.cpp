#include "util/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace flashkv {

bool Progress::StderrIsTty() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string what, uint64_t total, std::string unit)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      tty_(StderrIsTty()),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { Finish(); }

void Progress::Update(uint64_t done, const std::string& detail) {
  if (!tty_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  double secs = std::chrono::duration<double>(now - start_).count();
  double pct = total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(pct / 100.0 * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::string rate;
  if (secs > 0 && !unit_.empty()) rate = fmt::format(" {:.1f} {}/s", done / secs, unit_);
  std::string line = fmt::format("\r{} [{}] {:5.1f}% {}/{}{} {}", what_, bar, pct, done, total_,
                                 rate, detail);
  if (line.size() > 160) line.resize(160);
  std::fprintf(stderr, "%s\033[K", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::Finish() {
  if (tty_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  drawn_ = false;
}

}  // namespace flashkv
