// The CSV form of bench rows (tools/bench_sweep.h): the header, one line per row, and a
// parser that reads such a file back (for checks and for plotting a saved run). Must not:
// run the model or touch files.
//
// Columns, in order (issue 7; ds4-bench's first six with kvcache_bytes split in two):
//   ctx, prefill_tokens, prefill_tps, gen_tokens, gen_tps, kv_bytes, snapshot_bytes,
//   snapshot_save_ms, snapshot_load_ms
// Rates have 2 decimals (as ds4-bench), times 3, the rest are integers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tools/bench_sweep.h"
#include "util/status.h"

namespace flashkv {

// The header line, without a newline.
std::string_view BenchCsvHeader();
// One data line for `row`, without a newline.
std::string FormatBenchCsvRow(const BenchRow& row);

// A parsed data line: the numbers as written (rates and times rounded as printed).
struct BenchCsvRow {
  int64_t ctx = 0;
  int64_t prefill_tokens = 0;
  double prefill_tps = 0;
  int64_t gen_tokens = 0;
  double gen_tps = 0;
  uint64_t kv_bytes = 0;
  uint64_t snapshot_bytes = 0;
  double snapshot_save_ms = 0;
  double snapshot_load_ms = 0;
};

// The row's numbers unrounded (for plotting a run that is still in memory).
BenchCsvRow ToCsvRow(const BenchRow& row);

// Parses a whole CSV text: the exact header, then data lines (a final newline optional,
// no blank lines inside). Errors (kCorrupt) name the line and the column at fault.
Expected<std::vector<BenchCsvRow>> ParseBenchCsv(std::string_view text);

}  // namespace flashkv
