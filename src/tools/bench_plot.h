// The picture of a bench sweep (`flashkv bench --plot OUT.svg`): prefill and generation
// tokens/s against context, and the KV bytes beside them, as an SVG built with
// util/svg_plot.h. Must not: run the model or write files.
#pragma once

#include <span>
#include <string>

#include "tools/bench_csv.h"

namespace flashkv {

struct BenchPlotOptions {
  std::string title = "flashkv bench";
  bool log2_x = false;  // a geometric sweep (--step-mul) reads better on a log2 axis
};

// Three panels sharing the context axis: prefill tokens/s, generation tokens/s, and the
// live KV and snapshot sizes in MiB.
std::string BenchPlotSvg(std::span<const BenchCsvRow> rows, const BenchPlotOptions& options);

}  // namespace flashkv
