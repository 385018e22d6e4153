#include "tools/bench_csv.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace flashkv {
namespace {

constexpr std::string_view kHeader =
    "ctx,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kv_bytes,snapshot_bytes,"
    "snapshot_save_ms,snapshot_load_ms";
constexpr const char* kColumns[] = {
    "ctx",      "prefill_tokens", "prefill_tps",      "gen_tokens",      "gen_tps",
    "kv_bytes", "snapshot_bytes", "snapshot_save_ms", "snapshot_load_ms"};
constexpr size_t kNumColumns = sizeof(kColumns) / sizeof(kColumns[0]);

template <typename T>
Status ParseField(std::string_view field, size_t line, size_t col, T* out) {
  const char* end = field.data() + field.size();
  auto [p, ec] = std::from_chars(field.data(), end, *out);
  if (ec != std::errc() || p != end || field.empty()) {
    return Corrupt("line {}: column {} ({}) is '{}', not a number", line, col + 1, kColumns[col],
                   field);
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(*out)) {
      return Corrupt("line {}: column {} ({}) is not finite", line, col + 1, kColumns[col]);
    }
  }
  return Status::Ok();
}

}  // namespace

std::string_view BenchCsvHeader() {
  return kHeader;
}

std::string FormatBenchCsvRow(const BenchRow& r) {
  return fmt::format("{},{},{:.2f},{},{:.2f},{},{},{:.3f},{:.3f}", r.ctx, r.prefill_tokens,
                     r.prefill_tps(), r.gen_tokens, r.gen_tps(), r.kv_bytes, r.snapshot_bytes,
                     r.snapshot_save_ms, r.snapshot_load_ms);
}

BenchCsvRow ToCsvRow(const BenchRow& r) {
  return BenchCsvRow{
      r.ctx,      r.prefill_tokens, r.prefill_tps(),    r.gen_tokens,      r.gen_tps(),
      r.kv_bytes, r.snapshot_bytes, r.snapshot_save_ms, r.snapshot_load_ms};
}

Expected<std::vector<BenchCsvRow>> ParseBenchCsv(std::string_view text) {
  std::vector<BenchCsvRow> rows;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_no == 1) {
      if (line != kHeader) {
        return Corrupt("line 1 is not the bench header '{}': '{}'", kHeader, line);
      }
      continue;
    }
    if (line.empty()) return Corrupt("line {} is empty", line_no);
    std::string_view fields[kNumColumns];
    size_t n = 0;
    for (size_t start = 0;;) {
      const size_t comma = line.find(',', start);
      if (n == kNumColumns) {
        return Corrupt("line {} has more than {} columns", line_no, kNumColumns);
      }
      fields[n++] = line.substr(start, comma == std::string_view::npos ? comma : comma - start);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (n != kNumColumns) {
      return Corrupt("line {} has {} columns, expected {}", line_no, n, kNumColumns);
    }
    BenchCsvRow r;
    FLASHKV_RETURN_IF_ERROR(ParseField(fields[0], line_no, 0, &r.ctx));
    FLASHKV_RETURN_IF_ERROR(ParseField(fields[1], line_no, 1, &r.prefill_tokens));
    FLASHKV_RETURN_IF_ERROR(ParseField(fields[2], line_no, 2, &r.prefill_tps));
    FLASHKV_RETURN_IF_ERROR(ParseField(fields[3], line_no, 3, &r.gen_tokens));
    FLASHKV_RETURN_IF_ERROR(ParseField(fields[4], line_no, 4, &r.gen_tps));
    FLASHKV_RETURN_IF_ERROR(ParseField(fields[5], line_no, 5, &r.kv_bytes));
    FLASHKV_RETURN_IF_ERROR(ParseField(fields[6], line_no, 6, &r.snapshot_bytes));
    FLASHKV_RETURN_IF_ERROR(ParseField(fields[7], line_no, 7, &r.snapshot_save_ms));
    FLASHKV_RETURN_IF_ERROR(ParseField(fields[8], line_no, 8, &r.snapshot_load_ms));
    rows.push_back(r);
  }
  if (line_no == 0) return Corrupt("the bench CSV is empty");
  return rows;
}

}  // namespace flashkv
