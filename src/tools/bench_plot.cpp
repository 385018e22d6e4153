#include "tools/bench_plot.h"

#include "util/svg_plot.h"

namespace flashkv {

std::string BenchPlotSvg(std::span<const BenchCsvRow> rows, const BenchPlotOptions& options) {
  LineChart chart;
  chart.title = options.title;
  chart.x_label = "context (tokens)";
  chart.x_scale = options.log2_x ? PlotXScale::kLog2 : PlotXScale::kLinear;
  PlotSeries prefill{"prefill", "#1f77b4", {}};
  PlotSeries gen{"generation", "#d62728", {}};
  PlotSeries kv{"live KV", "#2ca02c", {}};
  PlotSeries snap{"snapshot", "#ff7f0e", {}};
  constexpr double kMiB = 1024.0 * 1024.0;
  for (const BenchCsvRow& r : rows) {
    const double x = double(r.ctx);
    prefill.points.push_back({x, r.prefill_tps});
    if (r.gen_tokens > 0) gen.points.push_back({x, r.gen_tps});
    kv.points.push_back({x, double(r.kv_bytes) / kMiB});
    snap.points.push_back({x, double(r.snapshot_bytes) / kMiB});
  }
  chart.panels.push_back(PlotPanel{"prefill tokens/s", {std::move(prefill)}});
  chart.panels.push_back(PlotPanel{"generation tokens/s", {std::move(gen)}});
  chart.panels.push_back(PlotPanel{"MiB", {std::move(kv), std::move(snap)}});
  return RenderLineChartSvg(chart);
}

}  // namespace flashkv
