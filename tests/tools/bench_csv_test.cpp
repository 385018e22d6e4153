// The bench CSV: exact header and line format, a parse of what was written, and errors
// that name the line and column.
#include "tools/bench_csv.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

BenchRow SampleRow() {
  BenchRow r;
  r.ctx = 4096;
  r.prefill_tokens = 2048;
  r.prefill_s = 0.5;  // 4096 tok/s
  r.gen_tokens = 128;
  r.gen_s = 3.0;  // 42.666… tok/s
  r.kv_bytes = 1234567;
  r.snapshot_bytes = 1300000;
  r.snapshot_save_ms = 1.23456;
  r.snapshot_load_ms = 0.5;
  return r;
}

TEST(BenchCsv, HeaderAndLine) {
  EXPECT_EQ(BenchCsvHeader(),
            "ctx,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kv_bytes,snapshot_bytes,"
            "snapshot_save_ms,snapshot_load_ms");
  EXPECT_EQ(FormatBenchCsvRow(SampleRow()),
            "4096,2048,4096.00,128,42.67,1234567,1300000,1.235,0.500");
  BenchRow idle;  // no time measured: rates print as 0
  EXPECT_EQ(FormatBenchCsvRow(idle), "0,0,0.00,0,0.00,0,0,0.000,0.000");
}

TEST(BenchCsv, ParsesWhatWasWritten) {
  BenchRow b = SampleRow();
  b.ctx = 6144;
  b.kv_bytes = 2000000;
  const std::string text = std::string(BenchCsvHeader()) + "\n" + FormatBenchCsvRow(SampleRow()) +
                           "\r\n" + FormatBenchCsvRow(b);  // CRLF and no final newline
  auto rows = ParseBenchCsv(text);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  const BenchCsvRow& r = (*rows)[0];
  EXPECT_EQ(r.ctx, 4096);
  EXPECT_EQ(r.prefill_tokens, 2048);
  EXPECT_DOUBLE_EQ(r.prefill_tps, 4096.0);
  EXPECT_EQ(r.gen_tokens, 128);
  EXPECT_DOUBLE_EQ(r.gen_tps, 42.67);
  EXPECT_EQ(r.kv_bytes, 1234567u);
  EXPECT_EQ(r.snapshot_bytes, 1300000u);
  EXPECT_DOUBLE_EQ(r.snapshot_save_ms, 1.235);
  EXPECT_DOUBLE_EQ(r.snapshot_load_ms, 0.5);
  EXPECT_EQ((*rows)[1].ctx, 6144);
  EXPECT_EQ((*rows)[1].kv_bytes, 2000000u);

  auto header_only = ParseBenchCsv(std::string(BenchCsvHeader()) + "\n");
  ASSERT_TRUE(header_only.ok());
  EXPECT_TRUE(header_only->empty());
}

TEST(BenchCsv, ToCsvRowKeepsUnroundedRates) {
  const BenchCsvRow r = ToCsvRow(SampleRow());
  EXPECT_DOUBLE_EQ(r.gen_tps, 128.0 / 3.0);
  EXPECT_EQ(r.kv_bytes, 1234567u);
}

TEST(BenchCsv, ErrorsNameTheLineAndColumn) {
  const std::string h = std::string(BenchCsvHeader()) + "\n";
  struct Case {
    std::string text;
    std::string message;
  } cases[] = {
      {"", "empty"},
      {"ctx_tokens,prefill_tokens\n", "line 1 is not the bench header"},
      {h + "1,2,3\n", "line 2 has 3 columns, expected 9"},
      {h + "1,2,3,4,5,6,7,8,9,10\n", "line 2 has more than 9 columns"},
      {h + "1,1,1.0,1,1.0,1,1,1,1\n1,1,x,1,1.0,1,1,1,1\n", "line 3: column 3 (prefill_tps) is 'x'"},
      {h + "1,1,1.0,1,1.0,-5,1,1,1\n", "column 6 (kv_bytes) is '-5'"},
      {h + "1,1,1.0,1,1.0,1,1,1,inf\n", "column 9 (snapshot_load_ms) is not finite"},
      {h + "\n1,1,1.0,1,1.0,1,1,1,1\n", "line 2 is empty"},
  };
  for (const Case& c : cases) {
    auto r = ParseBenchCsv(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(r.status().ToString().find(c.message), std::string::npos)
        << r.status().ToString() << " lacks " << c.message;
  }
}

}  // namespace
}  // namespace flashkv
