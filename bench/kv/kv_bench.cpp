// flashkv_bench_kv DIR [TOKENS...]: save and load throughput of disk KV snapshots for a
// state of DeepSeek V4 Flash's shape (43 layers: 2 sliding, 21 ratio-4 + indexer, 20
// ratio-128; head_dim 512, window 128, indexer dim 128, vocab 129280), built from the
// shape alone (no weights), at each token count (default 25000 100000). In the same run
// and directory, dd writes (conv=fsync) and reads (page cache dropped first) a file of the
// same size; the ratios are the figures docs/PERFORMANCE.md reports.
//
// Save = DiskCache::Save (host copy of the state on the caller's thread, while the writer
// thread already CRCs and writes the copied part) + Flush (the rest of the writes,
// fdatasync, rename, directory fsync). dd writes through the page cache like the old
// save path did; the same run also times dd with O_DIRECT (the save path's writes where
// the filesystem allows them) for reference. Load = DiskCache::Load
// (header/index checks, reads with CRC on the reader thread, KvState writes) with the
// file's pages dropped from the page cache first (posix_fadvise DONTNEED after the
// fsync), then again warm. FLASHKV_BENCH_CHUNK_TOKENS sets DiskCacheOptions::chunk_tokens
// (default: the cache's, 2048 — format v2, a manifest plus 2,048-token chunks; 0: one v1
// file); sizes and rates count the manifest and every chunk it names.
// FLASHKV_BENCH_READ_MB sets SnapshotLoadOptions::chunk_bytes (default 16: one buffered
// read()), FLASHKV_BENCH_READERS its reader threads (default 4), FLASHKV_BENCH_DIRECT=0|1
// its O_DIRECT chunk reads (default 1) and FLASHKV_BENCH_DIRECT_KB their size (1024);
// FLASHKV_BENCH_STREAM=0 writes chunk files whole after the capture
// (SnapshotWriteOptions::stream_chunks); FLASHKV_BENCH_KEEP=1 keeps the cache directory.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <chrono>

#include "backend/cpu/cpu_backend.h"
#include "kv_disk/disk_cache.h"
#include "util/file_io.h"
#include "util/sha1.h"

namespace flashkv {
namespace {

KvShape FlashShape(int ctx) {
  KvShape s;
  s.head_dim = 512;
  s.n_swa = 128;
  s.indexer_dim = 128;
  s.ctx_size = ctx;
  for (int l = 0; l < 43; ++l) {
    if (l < 2) {
      s.layers.push_back({0, false, false});
    } else if (l % 2 == 0) {
      s.layers.push_back({4, true, true});
    } else {
      s.layers.push_back({128, false, false});
    }
  }
  return s;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Mb(uint64_t b) {
  return double(b) / 1e6;
}

// Runs a shell command and returns its wall time in seconds (-1 on failure).
double Timed(const std::string& cmd) {
  const double t0 = Now();
  if (std::system(cmd.c_str()) != 0) return -1;
  return Now() - t0;
}

void Shell(const std::string& cmd) {
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "failed: %s\n", cmd.c_str());
}

void DropCache(const std::string& path) {
  auto f = File::OpenRead(path);
  if (f.ok()) f->DropCache();
}

// Every file of a cache directory and its chunks/.
void DropCacheDir(const std::string& dir) {
  for (const std::string& d : {dir, ChunkDirOf(dir)}) {
    auto list = ListDirectory(d);
    if (!list.ok()) continue;
    for (const DirEntry& e : *list) {
      if (e.is_regular) DropCache(JoinPath(d, e.name));
    }
  }
}

int Run(const std::string& dir, int64_t n_tokens) {
  constexpr int kVocab = 129280;
  CpuBackend be(nullptr);
  auto state = KvState::Create(be, FlashShape(int(n_tokens)));
  if (!state.ok()) {
    std::fprintf(stderr, "%s\n", state.status().ToString().c_str());
    return 1;
  }
  (void)state->SetTokenCount(n_tokens);
  std::mt19937 rng(1);
  std::vector<float> logits(kVocab);
  for (float& x : logits) x = float(rng() % 1000) * 0.01f;
  {
    std::vector<float> layer;
    for (int l = 0; l < 43; ++l) {
      layer.resize(state->LayerFloats(l));
      uint32_t x = uint32_t(l) * 2654435761u;
      for (float& v : layer) {
        x = x * 1664525u + 1013904223u;
        v = float(int32_t(x >> 8)) * 1e-7f;  // incompressible-ish values
      }
      (void)state->WriteLayer(l, layer.data());
    }
  }
  std::vector<int32_t> tokens(n_tokens);
  for (auto& t : tokens) t = int32_t(rng() % kVocab);
  const std::string text(size_t(n_tokens) * 4, 'x');  // ~4 bytes of text per token

  const std::string cache_dir = JoinPath(dir, "bench-cache");
  Shell("rm -rf '" + cache_dir + "'");
  DiskCacheOptions o;
  o.dir = cache_dir;
  o.budget_bytes = uint64_t(64) << 30;
  o.identity = SnapshotIdentity{Sha1Of("bench"), "official/q8"};
  if (const char* c = std::getenv("FLASHKV_BENCH_CHUNK_TOKENS"))
    o.chunk_tokens = uint32_t(std::atoi(c));
  // The restore's read size (and, for v2, its largest piece of whole chunk layers).
  if (const char* r = std::getenv("FLASHKV_BENCH_READ_MB"))
    o.load.chunk_bytes = size_t(std::max(1, std::atoi(r))) << 20;
  if (const char* r = std::getenv("FLASHKV_BENCH_READERS")) o.load.readers = std::atoi(r);
  if (const char* d = std::getenv("FLASHKV_BENCH_DIRECT")) o.load.direct = std::atoi(d) != 0;
  if (const char* w = std::getenv("FLASHKV_BENCH_STREAM"))
    o.write.stream_chunks = std::atoi(w) != 0;
  if (const char* d = std::getenv("FLASHKV_BENCH_DIRECT_KB"))
    o.load.direct_read_bytes = size_t(std::max(4, std::atoi(d))) << 10;
  auto cache = DiskCache::Open(o);
  if (!cache.ok()) {
    std::fprintf(stderr, "%s\n", cache.status().ToString().c_str());
    return 1;
  }
  SnapshotContent c;
  c.tokens = tokens;
  c.logits = logits;
  c.text = text;
  c.reason = SaveReason::kManual;
  const double t0 = Now();
  auto key = (*cache)->Save(*state, c);
  const double t1 = Now();
  Status st = (*cache)->Flush();
  const double t2 = Now();
  if (!key.ok() || !st.ok()) {
    std::fprintf(stderr, "save failed: %s %s\n", key.status().ToString().c_str(),
                 st.ToString().c_str());
    return 1;
  }
  // A second save of other ids: the steady state, where the writer's last buffer is reused.
  std::vector<int32_t> tokens2 = tokens;
  tokens2[0] = (tokens2[0] + 1) % kVocab;
  c.tokens = tokens2;
  const double t7 = Now();
  auto key2 = (*cache)->Save(*state, c);
  const double t8 = Now();
  st = (*cache)->Flush();
  const double t9 = Now();
  if (!key2.ok() || !st.ok()) return 1;
  (void)(*cache)->Remove(*key2);
  uint64_t bytes = 0;  // the manifest (or v1 file) and its chunks
  for (const DiskCacheEntry& e : (*cache)->List()) {
    if (e.key == *key) bytes = e.file_bytes + e.chunk_bytes;
  }

  // Cold load, then warm.
  DropCacheDir(cache_dir);
  const double t3 = Now();
  auto hit = (*cache)->Load(DiskLookup{.tokens = tokens, .text = {}}, *state);
  const double t4 = Now();
  if (!hit.ok()) {
    std::fprintf(stderr, "load failed: %s\n", hit.status().ToString().c_str());
    return 1;
  }
  const uint64_t cold_direct = hit->direct_bytes;
  const double cold_prepare_ms = hit->prepare_ms;
  const double t5 = Now();
  auto hit2 = (*cache)->Load(DiskLookup{.tokens = tokens, .text = {}}, *state);
  const double t6 = Now();
  if (!hit2.ok()) return 1;
  cache->reset();

  // dd on the same disk, same size: write with fsync, read with the cache dropped.
  const std::string ddf = JoinPath(dir, "bench-dd.bin");
  const uint64_t mib = (bytes + (1 << 20) - 1) >> 20;
  const double dd_wd =
      Timed("dd if=/dev/zero of='" + ddf + "' bs=16M count=" + std::to_string((mib + 15) / 16) +
            " oflag=direct conv=fsync status=none");
  Shell("rm -f '" + ddf + "'");
  const double dd_w = Timed("dd if=/dev/zero of='" + ddf + "' bs=1M count=" + std::to_string(mib) +
                            " conv=fsync status=none");
  Shell("dd if='" + ddf + "' iflag=nocache count=0 status=none");
  DropCache(ddf);
  const double dd_r = Timed("dd if='" + ddf + "' of=/dev/null bs=16M status=none");
  const double dd_rw = Timed("dd if='" + ddf + "' of=/dev/null bs=16M status=none");
  Shell("rm -f '" + ddf + "'");
  // FLASHKV_BENCH_KEEP=1 leaves the cache directory for a look at its files' layout.
  if (std::getenv("FLASHKV_BENCH_KEEP") == nullptr) Shell("rm -rf '" + cache_dir + "'");
  const double dd_bytes = double(mib << 20);

  const double save_mbs = Mb(bytes) / (t2 - t0);
  const double load_mbs = Mb(bytes) / (t4 - t3);
  const double warm_mbs = Mb(bytes) / (t6 - t5);
  const double ddw = Mb(uint64_t(dd_bytes)) / dd_w, ddr = Mb(uint64_t(dd_bytes)) / dd_r;
  const double ddrw = Mb(uint64_t(dd_bytes)) / dd_rw;
  const double ddwd = Mb(uint64_t(((mib + 15) / 16) << 24)) / dd_wd;
  std::printf(
      "tokens %lld: snapshot %.1f MB (chunk tokens %u, read %zu MiB, %d readers, O_DIRECT %s "
      "in %zu KiB reads: %.1f MB of the cold load; %.1f ms of it before the first streamed "
      "read)\n",
      static_cast<long long>(n_tokens), Mb(bytes), o.chunk_tokens, o.load.chunk_bytes >> 20,
      o.load.readers, o.load.direct ? "on" : "off", o.load.direct_read_bytes >> 10, Mb(cold_direct),
      cold_prepare_ms);
  std::printf(
      "  save  %7.0f MB/s  (Save returns in %.0f ms: host copy, writes under way; Flush "
      "%.0f ms)  dd write %7.0f MB/s  ratio %.2f  (dd O_DIRECT %.0f MB/s)\n",
      save_mbs, (t1 - t0) * 1e3, (t2 - t1) * 1e3, ddw, save_mbs / ddw, ddwd);
  const double save2_mbs = Mb(bytes) / (t9 - t7);
  std::printf(
      "  save  %7.0f MB/s  (Save returns in %.0f ms, copy into a reused buffer; Flush "
      "%.0f ms)  ratio %.2f\n",
      save2_mbs, (t8 - t7) * 1e3, (t9 - t8) * 1e3, save2_mbs / ddw);
  std::printf(
      "  load  %7.0f MB/s  (%.0f ms, page cache dropped)          dd read  %7.0f MB/s  "
      "ratio %.2f\n",
      load_mbs, (t4 - t3) * 1e3, ddr, load_mbs / ddr);
  std::printf(
      "  load  %7.0f MB/s  (%.0f ms, warm page cache)             dd read  %7.0f MB/s  "
      "ratio %.2f\n",
      warm_mbs, (t6 - t5) * 1e3, ddrw, warm_mbs / ddrw);
  return 0;
}

}  // namespace
}  // namespace flashkv

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: flashkv_bench_kv DIR [TOKENS...]\n");
    return 2;
  }
  std::vector<int64_t> counts;
  for (int i = 2; i < argc; ++i) counts.push_back(std::atoll(argv[i]));
  if (counts.empty()) counts = {25000, 100000};
  for (int64_t n : counts) {
    if (int rc = flashkv::Run(argv[1], n); rc != 0) return rc;
  }
  return 0;
}
