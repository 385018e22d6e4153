#include "cli/load_progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace flashkv::cli {

LoadReporter::LoadReporter(Sink sink) : sink_(std::move(sink)) {}

LoadReporter::~LoadReporter() = default;

void LoadReporter::Phase(const std::string& phase, double fraction) {
  bar_.reset();  // clears a finished bar before the next log line
  spdlog::info("start-up: {}", phase);
  if (sink_) sink_(phase, fraction);
}

LoadProgressFn LoadReporter::Weights(double from, double to) {
  return [this, from, to](uint64_t done, uint64_t total) { OnWeights(done, total, from, to); };
}

void LoadReporter::OnWeights(uint64_t done, uint64_t total, double from, double to) {
  constexpr uint64_t kMiB = uint64_t(1) << 20;
  if (bar_ == nullptr) {
    bar_ = std::make_unique<Progress>("loading weights", total / kMiB, "MiB");
    weights_start_ = std::chrono::steady_clock::now();
    logged_decile_ = 0;
    drawn_mib_ = ~uint64_t(0);
  }
  // The bar counts MiB: redrawn when that changes, not for each of the many small tensors.
  if (done / kMiB != drawn_mib_ || done >= total) {
    drawn_mib_ = done / kMiB;
    bar_->Update(drawn_mib_);
  }
  const double fraction = total > 0 ? double(done) / double(total) : 1.0;
  const int decile = int(fraction * 10);
  if (decile > logged_decile_) {
    logged_decile_ = decile;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - weights_start_).count();
    // A rate over the first milliseconds says nothing (the first tensors are small).
    const std::string rate = secs >= Progress::kMinRateSeconds
                                 ? fmt::format(", {:.0f} MiB/s", double(done) / double(kMiB) / secs)
                                 : "";
    spdlog::info("loading weights: {}% ({:.1f} of {:.1f} GiB{})", decile * 10,
                 double(done) / double(1ull << 30), double(total) / double(1ull << 30), rate);
  }
  if (sink_) sink_("loading weights", from + (to - from) * fraction);
  if (done >= total) bar_.reset();  // clears the line for what the command prints next
}

}  // namespace flashkv::cli
