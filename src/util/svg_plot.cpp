#include "util/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "util/xml_escape.h"

namespace flashkv {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c",
                                    "#ff7f0e", "#9467bd", "#8c564b"};
constexpr int kMarginLeft = 76;
constexpr int kMarginRight = 24;
constexpr int kMarginTop = 48;  // title, then the first panel's legend
constexpr int kPanelGap = 40;   // the next panel's legend sits in it
constexpr int kMarginBottom = 56;

bool Usable(const PlotPoint& p, PlotXScale scale) {
  return std::isfinite(p.x) && std::isfinite(p.y) && (scale == PlotXScale::kLinear || p.x > 0);
}

// Maps data x to [0, 1] along the axis.
struct XAxis {
  PlotXScale scale;
  double lo, hi;              // in axis units (log2 of x for kLog2)
  std::vector<double> ticks;  // data values

  double Unit(double x) const {
    const double v = scale == PlotXScale::kLog2 ? std::log2(x) : x;
    return (v - lo) / (hi - lo);
  }
};

XAxis MakeXAxis(const LineChart& chart) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (const PlotPanel& panel : chart.panels) {
    for (const PlotSeries& s : panel.series) {
      for (const PlotPoint& p : s.points) {
        if (!Usable(p, chart.x_scale)) continue;
        lo = std::min(lo, p.x);
        hi = std::max(hi, p.x);
      }
    }
  }
  XAxis a{chart.x_scale, 0, 1, {}};
  if (chart.x_scale == PlotXScale::kLog2) {
    int lo2 = std::isfinite(lo) ? int(std::floor(std::log2(lo))) : 0;
    int hi2 = std::isfinite(hi) ? int(std::ceil(std::log2(hi))) : 1;
    if (hi2 <= lo2) hi2 = lo2 + 1;
    a.lo = lo2;
    a.hi = hi2;
    const int stride = std::max(1, (hi2 - lo2 + 9) / 10);
    for (int k = lo2; k <= hi2; k += stride) a.ticks.push_back(std::ldexp(1.0, k));
    return a;
  }
  if (!std::isfinite(lo)) {
    lo = 0;
    hi = 1;
  }
  a.ticks = NiceTicks(lo, hi, 8);
  a.lo = a.ticks.front();
  a.hi = a.ticks.back();
  return a;
}

std::string Num(double v) {
  return fmt::format("{:.1f}", v);
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) hi = lo == 0 ? 1 : lo + std::fabs(lo) * 0.5;
  const double raw = (hi - lo) / std::max(1, max_ticks - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  const double start = std::floor(lo / step) * step;
  const double end = std::ceil(hi / step) * step;
  std::vector<double> ticks;
  for (int k = 0;; ++k) {
    const double t = start + k * step;
    if (t > end + step * 1e-9) break;
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string FormatTickLabel(double v, bool binary) {
  if (binary && v >= 1024 && std::fmod(v, 1024.0) == 0) {
    return fmt::format("{}K", int64_t(v / 1024));
  }
  std::string s = fmt::format("{:.6f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string RenderLineChartSvg(const LineChart& chart) {
  const int n_panels = std::max<int>(1, int(chart.panels.size()));
  const int width = std::max(chart.width, kMarginLeft + kMarginRight + 100);
  const int ph = std::max(chart.panel_height, 60);
  const int pw = width - kMarginLeft - kMarginRight;
  const int height = kMarginTop + n_panels * ph + (n_panels - 1) * kPanelGap + kMarginBottom;
  const XAxis xa = MakeXAxis(chart);
  const bool binary_x = chart.x_scale == PlotXScale::kLog2;

  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" "
      "font-weight=\"bold\">{3}</text>\n",
      width, height, Num(kMarginLeft + pw / 2.0), EscapeXml(chart.title));

  size_t color_index = 0;
  for (int pi = 0; pi < n_panels; ++pi) {
    const int top = kMarginTop + pi * (ph + kPanelGap);
    const PlotPanel empty;
    const PlotPanel& panel = pi < int(chart.panels.size()) ? chart.panels[pi] : empty;

    // The y range: 0 (or the lowest value, if negative) to the highest.
    double ymin = 0, ymax = -std::numeric_limits<double>::infinity();
    for (const PlotSeries& s : panel.series) {
      for (const PlotPoint& p : s.points) {
        if (!Usable(p, chart.x_scale)) continue;
        ymin = std::min(ymin, p.y);
        ymax = std::max(ymax, p.y);
      }
    }
    if (!std::isfinite(ymax) || ymax <= ymin) ymax = ymin + 1;
    const std::vector<double> yt = NiceTicks(ymin, ymax, 6);
    const double y0 = yt.front(), y1 = yt.back();
    auto px = [&](double x) { return kMarginLeft + xa.Unit(x) * pw; };
    auto py = [&](double y) { return top + ph - (y - y0) / (y1 - y0) * ph; };

    out += fmt::format("<g class=\"panel\" id=\"panel{}\">\n", pi);
    for (double t : yt) {
      out += fmt::format(
          "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#e0e0e0\"/>\n"
          "<text x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
          kMarginLeft, kMarginLeft + pw, Num(py(t)), kMarginLeft - 6, Num(py(t) + 4),
          FormatTickLabel(t, false));
    }
    for (double t : xa.ticks) {
      out += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#e0e0e0\"/>\n",
                         Num(px(t)), top, top + ph);
      if (pi == n_panels - 1) {
        out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", Num(px(t)),
                           top + ph + 16, FormatTickLabel(t, binary_x));
      }
    }
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n",
        kMarginLeft, top, pw, ph);
    out += fmt::format(
        "<text transform=\"translate(16 {0}) rotate(-90)\" text-anchor=\"middle\">{1}</text>\n",
        Num(top + ph / 2.0), EscapeXml(panel.y_label));

    // Series, then the legend above the panel, right-aligned, in series order. About 7 px
    // per character at font-size 12, plus the colour sample and a gap.
    auto legend_width = [](const PlotSeries& s) { return 7.0 * double(s.name.size()) + 30; };
    double legend_x = kMarginLeft + pw;
    for (const PlotSeries& s : panel.series) legend_x -= legend_width(s);
    for (const PlotSeries& s : panel.series) {
      const std::string color =
          s.color.empty() ? kPalette[color_index++ % (sizeof(kPalette) / sizeof(kPalette[0]))]
                          : s.color;
      std::string pts;
      std::string dots;
      for (const PlotPoint& p : s.points) {
        if (!Usable(p, chart.x_scale)) continue;
        if (!pts.empty()) pts += ' ';
        pts += Num(px(p.x)) + "," + Num(py(p.y));
        dots += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"/>\n", Num(px(p.x)),
                            Num(py(p.y)), color);
      }
      out += fmt::format(
          "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
          "points=\"{}\"/>\n",
          color, pts);
      out += dots;
      out += fmt::format(
          "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"3\"/>\n"
          "<text x=\"{4}\" y=\"{5}\">{6}</text>\n",
          Num(legend_x), Num(legend_x + 18), top - 12, color, Num(legend_x + 22), top - 8,
          EscapeXml(s.name));
      legend_x += legend_width(s);
    }
    out += "</g>\n";
  }
  const int bottom = kMarginTop + n_panels * ph + (n_panels - 1) * kPanelGap;
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     Num(kMarginLeft + pw / 2.0), bottom + 40, EscapeXml(chart.x_label));
  out += "</svg>\n";
  return out;
}

}  // namespace flashkv
