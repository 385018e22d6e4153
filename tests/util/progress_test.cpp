#include "util/progress.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(ProgressTest, LineShowsTheRateOnlyOnceItMeansSomething) {
  // 63 MiB after 0.19 us: the start of the chat pty transcript's weights bar read
  // "331578947.4 MiB/s". No rate until kMinRateSeconds.
  EXPECT_EQ(Progress::Line("loading weights", 63, 107, "MiB", 0.00000019, ""),
            "loading weights [#################.............]  58.9% 63/107 ");
  EXPECT_EQ(Progress::Line("prefill", 75, 82, "tok", Progress::kMinRateSeconds, "x"),
            "prefill [###########################...]  91.5% 75/82 150.0 tok/s x");
  EXPECT_EQ(Progress::Line("convert", 5, 0, "", 9.0, ""),
            "convert [##############################] 100.0% 5/0 ");
}

}  // namespace
}  // namespace flashkv
