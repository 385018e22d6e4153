// A small SVG line-chart writer: one or more panels stacked vertically that share an x
// axis, each with its own linear y axis from 0, series drawn as polylines with point
// markers and a legend. Enough to let a person look at a benchmark sweep (flashkv bench
// --plot) without a plotting package. Must not: know about models or benchmarks, or do
// I/O (the caller writes the returned text).
#pragma once

#include <string>
#include <vector>

namespace flashkv {

struct PlotPoint {
  double x = 0;
  double y = 0;
};

struct PlotSeries {
  std::string name;               // legend text
  std::string color;              // any SVG color; empty: the next of a fixed palette
  std::vector<PlotPoint> points;  // drawn in the given order; non-finite points skipped
};

struct PlotPanel {
  std::string y_label;
  std::vector<PlotSeries> series;
};

enum class PlotXScale {
  kLinear,
  kLog2,  // for geometric sweeps; ticks at powers of two; x must be > 0
};

struct LineChart {
  std::string title;
  std::string x_label;
  PlotXScale x_scale = PlotXScale::kLinear;
  int width = 820;         // px
  int panel_height = 240;  // px, per panel
  std::vector<PlotPanel> panels;
};

// The whole SVG document. Text is XML-escaped. An empty chart (no finite points) still
// yields a valid document with its title and axes.
std::string RenderLineChartSvg(const LineChart& chart);

// Tick values 1/2/5·10^k apart covering [lo, hi] with at most about `max_ticks` ticks,
// starting at the largest tick <= lo. Exposed for tests.
std::vector<double> NiceTicks(double lo, double hi, int max_ticks);
// A tick label: with `binary` (context sizes), multiples of 1024 from 1024 up as "2K";
// otherwise at most 6 decimals with trailing zeros dropped ("2048", "0.25", "12.5").
std::string FormatTickLabel(double v, bool binary);

}  // namespace flashkv
