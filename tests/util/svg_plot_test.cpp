// The SVG line-chart writer: tick choice, labels, and where points land on the canvas.
#include "util/svg_plot.h"

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(NiceTicks, StepsOfOneTwoFive) {
  // 7.3 over 5 intervals wants 1.46 per step: the next nice step is 2.
  EXPECT_EQ(NiceTicks(0, 7.3, 6), (std::vector<double>{0, 2, 4, 6, 8}));
  // 448 over 7 intervals wants 64: nice step 100, from 0 (<= 64) to 600 (>= 512).
  EXPECT_EQ(NiceTicks(64, 512, 8), (std::vector<double>{0, 100, 200, 300, 400, 500, 600}));
  // 0.9 over 5 wants 0.18: step 0.2.
  const std::vector<double> t = NiceTicks(0, 0.9, 6);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_NEAR(t[5], 1.0, 1e-12);
  EXPECT_NEAR(t[3], 0.6, 1e-12);
  // A flat range still gets an axis.
  EXPECT_NEAR(NiceTicks(0, 0, 6).back(), 1.0, 1e-12);
}

TEST(FormatTickLabel, BinaryContextsAndDecimals) {
  EXPECT_EQ(FormatTickLabel(2048, true), "2K");
  EXPECT_EQ(FormatTickLabel(65536, true), "64K");
  EXPECT_EQ(FormatTickLabel(1536, true), "1536");  // not a multiple of 1024
  EXPECT_EQ(FormatTickLabel(512, true), "512");
  EXPECT_EQ(FormatTickLabel(2048, false), "2048");
  EXPECT_EQ(FormatTickLabel(0.6000000000000001, false), "0.6");
  EXPECT_EQ(FormatTickLabel(12.5, false), "12.5");
  EXPECT_EQ(FormatTickLabel(0, false), "0");
}

TEST(RenderLineChartSvg, PointsLandOnTheAxesCorners) {
  LineChart c;
  // Strings are built, not assigned from literals: operator=(const char*) trips a GCC 12
  // -Wrestrict false positive here.
  c.title = std::string("a<b & \"c\"");
  c.x_label = std::string("x");
  c.panels.push_back(PlotPanel{"y", {PlotSeries{"s", "red", {{0, 0}, {10, 10}}}}});
  const std::string svg = RenderLineChartSvg(c);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"820\" height=\"344\"", 0),
            0u)
      << svg.substr(0, 120);
  EXPECT_NE(svg.find(">a&lt;b &amp; &quot;c&quot;</text>"), std::string::npos);
  // Plot area: x from 76 to 820 − 24 = 796, y from 48 (top) to 48 + 240 = 288. Both axes
  // run 0..10 (x ticks 2 apart, y ticks 2 apart), so (0,0) is the lower-left corner and
  // (10,10) the upper-right.
  EXPECT_NE(svg.find("<circle cx=\"76.0\" cy=\"288.0\" r=\"3\" fill=\"red\"/>"), std::string::npos);
  EXPECT_NE(svg.find("<circle cx=\"796.0\" cy=\"48.0\" r=\"3\" fill=\"red\"/>"), std::string::npos);
  EXPECT_NE(svg.find("points=\"76.0,288.0 796.0,48.0\""), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

TEST(RenderLineChartSvg, Log2AxisPanelsAndSkippedPoints) {
  LineChart c;
  c.x_scale = PlotXScale::kLog2;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  c.panels.push_back(
      PlotPanel{"a", {PlotSeries{"one", "", {{64, 1}, {128, 2}, {512, 4}, {1024, nan}}}}});
  c.panels.push_back(PlotPanel{
      "b", {PlotSeries{"two", "", {{64, 3}, {-5, 1}}}, PlotSeries{"three", "", {{2048, 3}}}}});
  const std::string svg = RenderLineChartSvg(c);
  EXPECT_EQ(Count(svg, "<g class=\"panel\""), 2u);
  EXPECT_EQ(Count(svg, "<polyline class=\"series\""), 3u);
  // NaN and x <= 0 (on a log axis) are dropped: 3 + 1 + 1 markers.
  EXPECT_EQ(Count(svg, "<circle "), 5u);
  // The x axis spans 2^6..2^11 with a tick per power of two, labelled under the last panel
  // only, 2048 as "2K".
  for (const char* label :
       {">64</text>", ">128</text>", ">256</text>", ">512</text>", ">1K</text>", ">2K</text>"}) {
    EXPECT_EQ(Count(svg, label), 1u) << label;
  }
  // 128 sits at (7 − 6) / (11 − 6) of the width: 76 + 720/5 = 220. Panel 1 runs y 0..4
  // (ticks 1 apart), so y = 2 is halfway down its 240 px.
  EXPECT_NE(svg.find("<circle cx=\"220.0\" cy=\"168.0\""), std::string::npos);
  // Default palette colours follow the series order across panels.
  EXPECT_NE(svg.find("stroke=\"#1f77b4\""), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"#d62728\""), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"#2ca02c\""), std::string::npos);
}

TEST(RenderLineChartSvg, EmptyChartIsStillADocument) {
  const std::string svg = RenderLineChartSvg(LineChart{});
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(Count(svg, "<g class=\"panel\""), 1u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

}  // namespace
}  // namespace flashkv
