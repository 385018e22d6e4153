// bench_csv_check: checks a `flashkv bench` CSV (and optionally its SVG) for shape and
// sanity, for the end-to-end CTest on the tiny model. Expectations come from the command
// line, hand-computed from the model shape in tests/engine/CMakeLists.txt:
//   bench_csv_check CSV --frontiers 64,128,... --gen G --n-vocab V
//       --kv-base CTX:BYTES --kv-per-token BYTES --kv-period M [--svg FILE]
// Checked: the frontiers exactly (so ctx is monotone), prefill_tokens = the interval,
// rates > 0, gen_tokens = G, kv_bytes = BYTES + per_token·(ctx − CTX) at every ctx >= CTX
// that is a multiple of M (whole compression periods past the window) and strictly
// growing, snapshot_bytes = kv_bytes + 4·ctx (token ids) + 4·V (logits) + a header/table/
// padding overhead under 4 KiB that is the same in every row, snapshot times >= 0. The SVG
// must be one document with a marker per row in each rate panel. Prints "N passed, 0
// failed"-style totals; exits 1 on any failure.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/bench_csv.h"
#include "util/file_io.h"

namespace {

using flashkv::BenchCsvRow;

struct Args {
  std::string csv;
  std::string svg;
  std::vector<int64_t> frontiers;
  int64_t gen = 0;
  int64_t n_vocab = 0;
  int64_t kv_base_ctx = 0;
  uint64_t kv_base_bytes = 0;
  uint64_t kv_per_token = 0;
  int64_t kv_period = 1;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  if (argc < 2) return false;
  a->csv = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--frontiers") {
      for (size_t p = 0; p <= v.size();) {
        const size_t c = std::min(v.find(',', p), v.size());
        a->frontiers.push_back(std::stoll(v.substr(p, c - p)));
        p = c + 1;
      }
    } else if (k == "--gen") {
      a->gen = std::stoll(v);
    } else if (k == "--n-vocab") {
      a->n_vocab = std::stoll(v);
    } else if (k == "--kv-base") {
      const size_t colon = v.find(':');
      if (colon == std::string::npos) return false;
      a->kv_base_ctx = std::stoll(v.substr(0, colon));
      a->kv_base_bytes = std::stoull(v.substr(colon + 1));
    } else if (k == "--kv-per-token") {
      a->kv_per_token = std::stoull(v);
    } else if (k == "--kv-period") {
      a->kv_period = std::stoll(v);
    } else if (k == "--svg") {
      a->svg = v;
    } else {
      return false;
    }
  }
  return !a->frontiers.empty() && a->n_vocab > 0 && a->kv_per_token > 0 && a->kv_period > 0;
}

class Checker {
 public:
  void Expect(bool ok, const std::string& what) {
    if (ok) {
      ++passed_;
    } else {
      ++failed_;
      std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    }
  }
  int Finish() const {
    std::printf("bench_csv_check: %d passed, %d failed\n", passed_, failed_);
    return failed_ == 0 ? 0 : 1;
  }

 private:
  int passed_ = 0;
  int failed_ = 0;
};

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!ParseArgs(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: bench_csv_check CSV --frontiers A,B,... --gen G --n-vocab V "
                 "--kv-base CTX:BYTES --kv-per-token BYTES --kv-period M [--svg FILE]\n");
    return 2;
  }
  auto text = flashkv::ReadWholeFile(a.csv);
  if (!text.ok()) {
    std::fprintf(stderr, "%s\n", text.status().ToString().c_str());
    return 1;
  }
  auto parsed = flashkv::ParseBenchCsv(*text);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s: %s\n", a.csv.c_str(), parsed.status().ToString().c_str());
    return 1;
  }
  const std::vector<BenchCsvRow>& rows = *parsed;
  Checker c;
  c.Expect(rows.size() == a.frontiers.size(),
           fmt::format("{} rows, expected {}", rows.size(), a.frontiers.size()));
  int64_t overhead0 = -1;
  for (size_t i = 0; i < rows.size() && i < a.frontiers.size(); ++i) {
    const BenchCsvRow& r = rows[i];
    const std::string at = fmt::format("row {} (ctx {})", i + 1, r.ctx);
    const int64_t prev = i == 0 ? 0 : rows[i - 1].ctx;
    c.Expect(r.ctx == a.frontiers[i], fmt::format("{}: ctx, expected {}", at, a.frontiers[i]));
    c.Expect(r.ctx > prev, fmt::format("{}: ctx not above the previous {}", at, prev));
    c.Expect(r.prefill_tokens == r.ctx - prev,
             fmt::format("{}: prefill_tokens {}, expected {}", at, r.prefill_tokens, r.ctx - prev));
    c.Expect(r.prefill_tps > 0, fmt::format("{}: prefill_tps {} not positive", at, r.prefill_tps));
    c.Expect(r.gen_tokens == a.gen,
             fmt::format("{}: gen_tokens {}, expected {}", at, r.gen_tokens, a.gen));
    if (a.gen > 0)
      c.Expect(r.gen_tps > 0, fmt::format("{}: gen_tps {} not positive", at, r.gen_tps));
    if (i > 0) {
      c.Expect(r.kv_bytes > rows[i - 1].kv_bytes, fmt::format("{}: kv_bytes did not grow", at));
    }
    if (r.ctx >= a.kv_base_ctx && r.ctx % a.kv_period == 0) {
      const uint64_t want = a.kv_base_bytes + a.kv_per_token * uint64_t(r.ctx - a.kv_base_ctx);
      c.Expect(r.kv_bytes == want, fmt::format("{}: kv_bytes {}, the per-token figure predicts {}",
                                               at, r.kv_bytes, want));
    }
    const int64_t overhead =
        int64_t(r.snapshot_bytes) - int64_t(r.kv_bytes) - 4 * r.ctx - 4 * a.n_vocab;
    c.Expect(overhead > 0 && overhead < 4096,
             fmt::format("{}: snapshot_bytes {} leave {} bytes beside kv, ids and logits", at,
                         r.snapshot_bytes, overhead));
    // Header and table are fixed; padding to 64-byte sections varies a little with ctx.
    if (overhead0 < 0) overhead0 = overhead;
    c.Expect(overhead - overhead0 < 64 * 16 && overhead0 - overhead < 64 * 16,
             fmt::format("{}: snapshot overhead {} far from the first row's {}", at, overhead,
                         overhead0));
    c.Expect(r.snapshot_save_ms >= 0 && r.snapshot_load_ms >= 0,
             fmt::format("{}: negative snapshot time", at));
  }
  if (!a.svg.empty()) {
    auto svg = flashkv::ReadWholeFile(a.svg);
    c.Expect(svg.ok(), fmt::format("{} is readable", a.svg));
    if (svg.ok()) {
      c.Expect(svg->rfind("<svg ", 0) == 0 && Count(*svg, "</svg>") == 1,
               fmt::format("{} is one SVG document", a.svg));
      c.Expect(Count(*svg, "<g class=\"panel\"") == 3, fmt::format("{} has 3 panels", a.svg));
      // prefill, generation, live KV and snapshot: one marker per row each.
      const size_t want = rows.size() * (a.gen > 0 ? 4 : 3);
      c.Expect(Count(*svg, "<circle ") == want,
               fmt::format("{} has {} markers, expected {}", a.svg, Count(*svg, "<circle "), want));
    }
  }
  return c.Finish();
}
