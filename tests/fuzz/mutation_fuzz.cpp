// flashkv_fuzz: a seeded mutation fuzzer for the targets in fuzz_targets.h that needs no
// special compiler, so CTest runs it on every build (and under ASan + UBSan in
// build-asan). From the target's seeds it applies byte-level mutations (bit flips,
// boundary integers over length and count fields, range deletes, duplications, splices,
// truncations), keeps inputs that get as deep into the parser as the input they came from
// as new bases, and runs for a time or a number of runs. The input sequence depends only on the
// seed, so a failure at run K reproduces with the same --seed (--dump-at K writes that input to a
// file). A run that takes longer than --hang-seconds is reported as a hang and aborts.
//
//   flashkv_fuzz TARGET [--seconds S] [--runs N] [--seed X] [--hang-seconds H]
//                       [--dump-at K FILE] [--write-seeds DIR]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_targets.h"

namespace flashkv::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxInput = size_t(1) << 20;
constexpr int kMaxDepth = 7;       // deepest stage a target reports
constexpr size_t kMaxLevel = 256;  // inputs kept per depth

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  void Mutate(Bytes& b, const std::vector<Bytes>& corpus) {
    const int n = 1 + int(Below(Below(4) == 0 ? 16 : 4));
    for (int i = 0; i < n; ++i) MutateOnce(b, corpus);
    if (b.size() > kMaxInput) b.resize(kMaxInput);
  }

 private:
  // Values that sit on the edges of length, count and offset checks.
  uint64_t Interesting(size_t size) {
    static constexpr uint64_t kValues[] = {
        0,          1,           2,          7,      8,         0x7f,       0x80,
        0xff,       0x100,       0x7fff,     0xffff, 0x10000,   0x7fffffff, 0x80000000,
        0xffffffff, 0x100000000, ~0ull >> 1, ~0ull,  ~0ull - 1, 1ull << 40};
    const uint64_t pick = Below(std::size(kValues) + 3);
    if (pick < std::size(kValues)) return kValues[pick];
    // Sizes near the input's own: offsets just past the end, lengths off by one.
    return uint64_t(size) + Below(17) - 8;
  }

  void MutateOnce(Bytes& b, const std::vector<Bytes>& corpus) {
    switch (Below(11)) {
      case 0:  // flip a bit
        if (!b.empty()) b[Below(b.size())] ^= uint8_t(1u << Below(8));
        break;
      case 1:  // a random byte
        if (!b.empty()) b[Below(b.size())] = uint8_t(Below(256));
        break;
      case 2:
      case 3: {  // an interesting 1/2/4/8-byte little-endian integer
        static constexpr size_t kWidths[] = {1, 2, 4, 8};
        const size_t w = kWidths[Below(4)];
        if (b.size() < w) break;
        const uint64_t v = Interesting(b.size());
        const size_t at = Below(b.size() - w + 1);
        std::memcpy(b.data() + at, &v, w);
        break;
      }
      case 4: {  // nudge a u32 or u64 (counts and lengths)
        const size_t w = Below(2) ? 4 : 8;
        if (b.size() < w) break;
        const size_t at = Below(b.size() - w + 1);
        uint64_t v = 0;
        std::memcpy(&v, b.data() + at, w);
        v += Below(2) ? Below(16) + 1 : ~Below(16);
        std::memcpy(b.data() + at, &v, w);
        break;
      }
      case 5: {  // delete a range
        if (b.empty()) break;
        const size_t at = Below(b.size());
        const size_t len = 1 + Below(std::min<size_t>(b.size() - at, 64));
        b.erase(b.begin() + at, b.begin() + at + len);
        break;
      }
      case 6: {  // duplicate a range
        if (b.empty() || b.size() >= kMaxInput) break;
        const size_t at = Below(b.size());
        const size_t len = 1 + Below(std::min<size_t>(b.size() - at, 64));
        const Bytes piece(b.begin() + at, b.begin() + at + len);
        b.insert(b.begin() + Below(b.size() + 1), piece.begin(), piece.end());
        break;
      }
      case 7:  // truncate
        if (!b.empty()) b.resize(Below(b.size()));
        break;
      case 8: {  // splice another input's tail
        const Bytes& other = corpus[Below(corpus.size())];
        if (other.empty()) break;
        const size_t at = Below(b.size() + 1);
        const size_t from = Below(other.size());
        b.resize(at);
        b.insert(b.end(), other.begin() + from, other.end());
        break;
      }
      case 9: {  // insert random bytes
        const size_t len = 1 + Below(16);
        const size_t at = Below(b.size() + 1);
        Bytes r(len);
        for (uint8_t& x : r) x = uint8_t(Below(256));
        b.insert(b.begin() + at, r.begin(), r.end());
        break;
      }
      default: {  // overwrite with a run of one byte
        if (b.empty()) break;
        const size_t at = Below(b.size());
        const size_t len = 1 + Below(std::min<size_t>(b.size() - at, 32));
        std::memset(b.data() + at, Below(2) ? 0xff : 0, len);
        break;
      }
    }
  }

  std::mt19937_64 rng_;
};

struct Flags {
  std::string target;
  double seconds = 120;
  uint64_t runs = 0;  // 0: until the time is up
  uint64_t seed = 1;
  double hang_seconds = 60;
  uint64_t dump_at = 0;
  std::string dump_file;
  std::string write_seeds;
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  if (argc < 2) return false;
  f->target = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--seconds" && (v = next())) {
      f->seconds = std::atof(v);
    } else if (a == "--runs" && (v = next())) {
      f->runs = std::strtoull(v, nullptr, 10);
    } else if (a == "--seed" && (v = next())) {
      f->seed = std::strtoull(v, nullptr, 10);
    } else if (a == "--hang-seconds" && (v = next())) {
      f->hang_seconds = std::atof(v);
    } else if (a == "--dump-at" && (v = next())) {
      f->dump_at = std::strtoull(v, nullptr, 10);
      const char* file = next();
      if (file == nullptr) return false;
      f->dump_file = file;
    } else if (a == "--write-seeds" && (v = next())) {
      f->write_seeds = v;
    } else {
      return false;
    }
  }
  return true;
}

bool WriteBytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  return bool(out);
}

// Watches the run in progress; one that outlives the limit is a hang.
class HangWatch {
 public:
  HangWatch(double limit_s, const Flags& flags) : limit_s_(limit_s), flags_(flags) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~HangWatch() {
    stop_ = true;
    thread_.join();
  }
  void Start(uint64_t run, const Bytes* input) {
    std::lock_guard<std::mutex> lock(mu_);
    run_ = run;
    input_ = input;
    started_ = Clock::now();
    busy_ = true;
  }
  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }

 private:
  void Loop() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::lock_guard<std::mutex> lock(mu_);
      if (!busy_) continue;
      const double s = std::chrono::duration<double>(Clock::now() - started_).count();
      if (s < limit_s_) continue;
      const std::string file = "fuzz-" + flags_.target + "-hang.bin";
      WriteBytes(file, *input_);
      std::fprintf(stderr,
                   "flashkv_fuzz %s: HANG: run %llu (seed %llu) has taken %.0f s; input in %s\n",
                   flags_.target.c_str(), (unsigned long long)run_, (unsigned long long)flags_.seed,
                   s, file.c_str());
      std::fflush(stderr);
      std::abort();
    }
  }

  const double limit_s_;
  const Flags& flags_;
  std::mutex mu_;
  uint64_t run_ = 0;
  const Bytes* input_ = nullptr;
  Clock::time_point started_;
  bool busy_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int Main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr,
                 "usage: flashkv_fuzz TARGET [--seconds S] [--runs N] [--seed X] "
                 "[--hang-seconds H] [--dump-at K FILE] [--write-seeds DIR]\ntargets:");
    for (const Target& t : Targets()) std::fprintf(stderr, " %s", std::string(t.name).c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  const Target* target = FindTarget(flags.target);
  if (target == nullptr) {
    std::fprintf(stderr, "flashkv_fuzz: unknown target %s\n", flags.target.c_str());
    return 2;
  }
  const std::vector<Bytes> seeds = target->seeds();
  if (seeds.empty()) {
    std::fprintf(stderr, "flashkv_fuzz %s: no seeds\n", flags.target.c_str());
    return 1;
  }
  if (!flags.write_seeds.empty()) {
    for (size_t i = 0; i < seeds.size(); ++i) {
      const std::string path = flags.write_seeds + "/seed-" + std::to_string(i);
      if (!WriteBytes(path, seeds[i])) {
        std::fprintf(stderr, "flashkv_fuzz: cannot write %s\n", path.c_str());
        return 1;
      }
    }
    return 0;
  }
  // The corpus by how deep its inputs get. A parent is drawn from a random level, so the
  // few inputs that get deep are mutated as often as the many that stop early; a child
  // that gets at least as deep joins its level (past the cap it replaces a random input
  // there that is not a seed).
  std::vector<std::vector<Bytes>> levels(kMaxDepth + 1);
  std::vector<size_t> seeds_at(kMaxDepth + 1, 0);
  for (size_t i = 0; i < seeds.size(); ++i) {
    const int d = std::clamp(target->run(seeds[i]), 0, kMaxDepth);
    if (d == 0) {
      std::fprintf(stderr, "flashkv_fuzz %s: seed %zu is not accepted\n", flags.target.c_str(), i);
      return 1;
    }
    levels[size_t(d)].push_back(seeds[i]);
    ++seeds_at[size_t(d)];
  }
  std::vector<Bytes> all = seeds;  // splice sources
  std::vector<uint64_t> reached(kMaxDepth + 1, 0);
  Mutator m(flags.seed);
  HangWatch watch(flags.hang_seconds, flags);
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point end = t0 + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(flags.seconds));
  uint64_t run = 0;
  Bytes input;
  while ((flags.runs == 0 || run < flags.runs) && (flags.runs > 0 || Clock::now() < end)) {
    ++run;
    size_t level = 0;
    do {
      level = 1 + size_t(m.Below(kMaxDepth));
    } while (levels[level].empty());
    input = levels[level][m.Below(levels[level].size())];
    m.Mutate(input, all);
    if (run == flags.dump_at) {
      WriteBytes(flags.dump_file, input);
      std::printf("flashkv_fuzz %s: run %llu written to %s\n", flags.target.c_str(),
                  (unsigned long long)run, flags.dump_file.c_str());
      return 0;
    }
    watch.Start(run, &input);
    const int depth = std::clamp(target->run(input), 0, kMaxDepth);
    watch.Done();
    ++reached[size_t(depth)];
    if (depth > 0 && size_t(depth) >= level) {
      std::vector<Bytes>& into = levels[size_t(depth)];
      if (into.size() < kMaxLevel) {
        into.push_back(input);
      } else if (into.size() > seeds_at[size_t(depth)]) {
        const size_t keep = seeds_at[size_t(depth)];
        into[keep + m.Below(into.size() - keep)] = input;
      }
      if (all.size() < kMaxLevel) {
        all.push_back(input);
      } else {
        all[seeds.size() + m.Below(all.size() - seeds.size())] = input;
      }
    }
    if (run % 100000 == 0) {
      std::printf("flashkv_fuzz %s: %llu runs, %.0f s\n", flags.target.c_str(),
                  (unsigned long long)run,
                  std::chrono::duration<double>(Clock::now() - t0).count());
      std::fflush(stdout);
    }
  }
  std::string depths;
  size_t corpus = 0;
  for (size_t d = 0; d < reached.size(); ++d) {
    corpus += levels[d].size();
    if (reached[d] == 0 && levels[d].empty()) continue;
    if (!depths.empty()) depths += " ";
    depths += std::to_string(d) + ":" + std::to_string(reached[d]);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "flashkv_fuzz %s: %llu runs in %.1f s (%.0f/s), seed %llu, runs by depth reached {%s}, "
      "corpus %zu: no crash, hang or sanitizer report\n",
      flags.target.c_str(), (unsigned long long)run, s, double(run) / std::max(s, 1e-9),
      (unsigned long long)flags.seed, depths.c_str(), corpus);
  return 0;
}

}  // namespace
}  // namespace flashkv::fuzz

int main(int argc, char** argv) {
  return flashkv::fuzz::Main(argc, argv);
}
