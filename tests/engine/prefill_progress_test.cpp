// A long prefill's progress in the server log (engine/prefill_progress.h): one line every
// kPrefillLogInterval while unfinished, the first an interval after the start, none once
// done, and the line names tokens done / total, the share, the rate and the session.
#include <gtest/gtest.h>

#include "engine/prefill_progress.h"

namespace flashkv {
namespace {

TEST(PrefillProgressTest, OneLineAnIntervalWhileUnfinished) {
  const WorkerClock::time_point t0{};
  const WorkerClock::time_point never = t0 - std::chrono::hours(1);
  const auto at = [&](double s) {
    return t0 + std::chrono::duration_cast<WorkerClock::duration>(std::chrono::duration<double>(s));
  };
  EXPECT_FALSE(PrefillLogDue(at(4.9), t0, never, 100, 4000));
  EXPECT_TRUE(PrefillLogDue(at(5.0), t0, never, 100, 4000));
  // Logged at 5 s: the next line is due at 10 s.
  EXPECT_FALSE(PrefillLogDue(at(9.9), t0, at(5.0), 2000, 4000));
  EXPECT_TRUE(PrefillLogDue(at(10.0), t0, at(5.0), 2000, 4000));
  // Done: nothing more, however long it took.
  EXPECT_FALSE(PrefillLogDue(at(60.0), t0, never, 4000, 4000));
}

TEST(PrefillProgressTest, TheLineSaysDoneTotalShareRateAndSession) {
  EXPECT_EQ(PrefillProgressLine(1000, 4000, 5.0, 3),
            "prefill: 1000/4000 tokens (25%), 200.0 tok/s, session 3");
  EXPECT_EQ(PrefillProgressLine(0, 0, 0.0, 0), "prefill: 0/0 tokens (0%), 0.0 tok/s, session 0");
}

}  // namespace
}  // namespace flashkv
