// `flashkv kv ls|show|verify|du|rm|gc --dir D`: inspect and maintain a disk KV cache
// directory. ls, show, verify and du only read (safe while a server uses the directory); rm
// and gc take the directory lock like a server does.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "kv_disk/disk_cache.h"
#include "snapshot/snapshot_chunks.h"
#include "snapshot/snapshot_codec.h"
#include "util/file_io.h"

namespace flashkv::cli {
namespace {

struct KvFlags {
  std::string dir;
  std::string key;
  uint64_t budget_mb = 0;
  int text_chars = 60;
};

// One line of text for a table: control bytes and newlines escaped, cut to `n` bytes.
std::string OneLine(std::string_view s, size_t n) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= n) {
      out += "…";
      break;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += char(c);
    }
  }
  return out;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Age(int64_t ms) {
  const int64_t s = std::max<int64_t>(0, (NowMs() - ms) / 1000);
  if (s < 120) return fmt::format("{}s", s);
  if (s < 7200) return fmt::format("{}m", s / 60);
  if (s < 172800) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

double Mib(uint64_t b) {
  return double(b) / (1024.0 * 1024.0);
}

Expected<DiskCacheEntry> FindEntry(const std::string& dir, std::string_view prefix) {
  if (prefix.size() < 4) return InvalidArgument("give at least 4 hex digits of the key");
  FLASHKV_ASSIGN_OR_RETURN(CacheDirectoryView view, InspectCacheDirectory(dir));
  const DiskCacheEntry* found = nullptr;
  for (const DiskCacheEntry& e : view.entries) {
    if (!e.key.starts_with(prefix)) continue;
    if (found) return InvalidArgument("more than one entry starts with {}", prefix);
    found = &e;
  }
  if (!found) {
    for (const auto& [path, st] : view.damaged) {
      if (path.find(prefix) != std::string::npos) {
        return st.WithContext("entry " + std::string(prefix) + " is damaged");
      }
    }
    return NotFound("no entry in {} starts with {}", dir, prefix);
  }
  return *found;
}

Status Ls(const KvFlags& f) {
  FLASHKV_ASSIGN_OR_RETURN(CacheDirectoryView view, InspectCacheDirectory(f.dir));
  std::printf("%-12s %8s %9s %-9s %5s %6s %-12s %s\n", "key", "tokens", "MiB", "reason", "hits",
              "age", "numerics", "text");
  for (const DiskCacheEntry& e : view.entries) {
    std::printf("%-12s %8u %9.1f %-9s %5u %6s %-12s %s\n", e.key.substr(0, 12).c_str(), e.n_tokens,
                Mib(e.file_bytes + e.chunk_bytes),  // v2: the manifest and its chunks
                std::string(SaveReasonName(e.reason)).c_str(), e.hit_count,
                Age(e.last_used_ms).c_str(), e.numerics.c_str(),
                OneLine(e.text, size_t(f.text_chars)).c_str());
  }
  size_t damaged = 0;
  for (const auto& [path, st] : view.damaged) {
    // Another format version is not damage: a later flashkv reads it.
    const bool other = st.code() == StatusCode::kUnsupported;
    damaged += !other;
    std::printf("%s %s: %s\n", other ? "OTHER-VERSION" : "DAMAGED", path.c_str(),
                st.message().c_str());
  }
  std::printf("%zu entries, %zu damaged, %llu quarantined, %llu temp; %.1f MiB in the directory\n",
              view.entries.size(), damaged, static_cast<unsigned long long>(view.quarantined_files),
              static_cast<unsigned long long>(view.temp_files), Mib(view.total_bytes));
  return Status::Ok();
}

Status Show(const KvFlags& f) {
  FLASHKV_ASSIGN_OR_RETURN(DiskCacheEntry e, FindEntry(f.dir, f.key));
  FLASHKV_ASSIGN_OR_RETURN(File file, File::OpenRead(e.path));
  FLASHKV_ASSIGN_OR_RETURN(SnapshotHeader h, ReadSnapshotHeader(file));
  std::printf("file:        %s\n", e.path.c_str());
  std::printf("key:         %s\n", e.key.c_str());
  std::printf("model:       %s\n", Sha1Hex(h.identity.model).c_str());
  std::printf("numerics:    %s\n", h.identity.numerics.c_str());
  std::printf("shape:       %u layers, head_dim %u, window %u, indexer_dim %u, vocab %u\n",
              h.n_layer, h.head_dim, h.n_swa, h.indexer_dim, h.n_vocab);
  std::printf("tokens:      %u (saved from a context of %u)\n", h.n_tokens, h.ctx_size);
  std::printf("reason:      %s\n", std::string(SaveReasonName(h.reason)).c_str());
  std::printf("bytes:       %llu (%.1f MiB)\n", static_cast<unsigned long long>(h.file_bytes),
              Mib(h.file_bytes));
  std::printf("created:     %s ago\n", Age(h.created_ms).c_str());
  std::printf("last used:   %s ago%s\n", Age(h.last_used_ms).c_str(),
              h.stats_ok ? "" : " (stats block damaged: reset)");
  std::printf("hits:        %u\n", h.hit_count);
  std::printf("format:      version %u%s\n", h.version,
              h.n_chunks > 0 ? fmt::format(", {} chunks of {} tokens ({:.1f} MiB)", h.n_chunks,
                                           h.chunk_tokens, Mib(e.chunk_bytes))
                                   .c_str()
                             : "");
  std::printf("sections:    %zu\n", h.sections.size());
  for (const SnapshotSection& s : h.sections) {
    if (s.kind == SnapshotSectionKind::kLayer && s.tag > 1 && s.tag + 1 < h.n_layer) continue;
    std::printf("  kind %u tag %-10u offset %12llu bytes %12llu crc32c %08x\n", uint32_t(s.kind),
                s.tag, static_cast<unsigned long long>(s.offset),
                static_cast<unsigned long long>(s.bytes), s.crc32c);
  }
  std::printf("text (%zu bytes):\n%s\n", e.text.size(), e.text.c_str());
  return Status::Ok();
}

// A directory holding nothing a cache writes (no lock file, entry, chunk or quarantine):
// `kv verify --dir /tmp` says so instead of "0 bad".
bool LooksLikeCache(const std::string& dir, const CacheDirectoryView& view) {
  if (!view.entries.empty() || !view.damaged.empty() || view.chunk_files > 0) return true;
  auto files = ListDirectory(dir);
  if (!files.ok()) return false;
  for (const DirEntry& e : *files) {
    if (e.name == kLockFileName || e.name == kChunkDirName) return true;
  }
  return false;
}

Status Verify(const KvFlags& f, bool* all_ok) {
  FLASHKV_ASSIGN_OR_RETURN(CacheDirectoryView view, InspectCacheDirectory(f.dir));
  if (!LooksLikeCache(f.dir, view)) {
    return NotFound("{} is not a flashkv cache directory (no lock file, entries or chunks)", f.dir);
  }
  size_t bad = 0, other = 0;
  for (const auto& [path, st] : view.damaged) {
    if (st.code() == StatusCode::kUnsupported) {
      ++other;
      std::printf("OTHER-VERSION %s: %s\n", path.c_str(), st.message().c_str());
      continue;
    }
    ++bad;
    std::printf("BAD %s: %s\n", path.c_str(), st.message().c_str());
  }
  uint64_t bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const DiskCacheEntry& e : view.entries) {
    auto h = VerifySnapshotFile(e.path);
    if (h.ok()) {
      bytes += e.file_bytes + e.chunk_bytes;  // v2: its chunks were read whole too
      std::printf("OK  %s (%u tokens)\n", e.path.c_str(), e.n_tokens);
    } else if (h.status().code() == StatusCode::kUnsupported) {
      ++other;
      std::printf("OTHER-VERSION %s\n", h.status().message().c_str());
    } else {
      ++bad;
      std::printf("BAD %s\n", h.status().message().c_str());
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "%zu verified, %zu bad, %zu of another format version; %.1f MiB checked at %.0f "
      "MiB/s\n",
      view.entries.size() + view.damaged.size() - bad - other, bad, other, Mib(bytes),
      s > 0 ? Mib(bytes) / s : 0.0);
  *all_ok = bad == 0;
  return Status::Ok();
}

// Logical bytes (every entry's whole state: its manifest plus every chunk it names, what
// unchunked files would hold) against the physical bytes of the directory.
Status Du(const KvFlags& f) {
  FLASHKV_ASSIGN_OR_RETURN(CacheDirectoryView view, InspectCacheDirectory(f.dir));
  uint64_t manifests = 0, logical = 0, chunk_refs = 0;
  for (const DiskCacheEntry& e : view.entries) {
    manifests += e.file_bytes;
    logical += e.file_bytes + e.chunk_bytes;
    chunk_refs += e.chunks;
  }
  std::printf("entries:   %zu (%.1f MiB of manifests and whole-state files)\n", view.entries.size(),
              Mib(manifests));
  std::printf("chunks:    %llu files, %.1f MiB, named %llu times by the entries\n",
              static_cast<unsigned long long>(view.chunk_files), Mib(view.chunk_bytes),
              static_cast<unsigned long long>(chunk_refs));
  std::printf("logical:   %.1f MiB (sum of every entry's full state)\n", Mib(logical));
  std::printf("physical:  %.1f MiB (every file in the directory, quarantine and temp too)\n",
              Mib(view.total_bytes));
  std::printf("ratio:     %.2fx logical / physical\n",
              view.total_bytes > 0 ? double(logical) / double(view.total_bytes) : 0.0);
  return Status::Ok();
}

Expected<std::unique_ptr<DiskCache>> OpenForMaintenance(const KvFlags& f, uint64_t budget) {
  DiskCacheOptions o;
  o.dir = f.dir;
  o.budget_bytes = budget;
  return DiskCache::Open(o);
}

void RegisterKv(CLI::App& app) {
  auto* kv = app.add_subcommand("kv", "Inspect and maintain a disk KV cache directory");
  kv->require_subcommand(1);
  auto f = std::make_shared<KvFlags>();
  auto add_dir = [&](CLI::App* c) {
    c->add_option("--kv-disk-dir,--dir", f->dir, "the cache directory (as serve's --kv-disk-dir)")
        ->required();
  };

  auto* ls = kv->add_subcommand("ls", "List entries: tokens, size, reason, hits, age, text");
  add_dir(ls);
  ls->add_option("--text-chars", f->text_chars, "bytes of text shown")->capture_default_str();
  ls->callback([f] {
    Status s = Ls(*f);
    if (!s.ok()) Fail("kv ls", s);
  });

  auto* show = kv->add_subcommand("show", "Show one entry's header, sections and text");
  add_dir(show);
  show->add_option("KEY", f->key, "the key or a unique prefix (>= 4 hex digits)")->required();
  show->callback([f] {
    Status s = Show(*f);
    if (!s.ok()) Fail("kv show", s);
  });

  auto* verify = kv->add_subcommand("verify", "Read every entry whole and check its checksums");
  add_dir(verify);
  verify->callback([f] {
    bool ok = true;
    Status s = Verify(*f, &ok);
    if (!s.ok()) Fail("kv verify", s);
    if (!ok) Fail("kv verify", Corrupt("damaged entries found"), 2);
  });

  auto* du = kv->add_subcommand("du", "Logical bytes (every entry's full state) vs physical");
  add_dir(du);
  du->callback([f] {
    Status s = Du(*f);
    if (!s.ok()) Fail("kv du", s);
  });

  auto* rm = kv->add_subcommand("rm", "Remove an entry");
  add_dir(rm);
  rm->add_option("KEY", f->key, "the key or a unique prefix (>= 4 hex digits)")->required();
  rm->callback([f] {
    auto cache = OpenForMaintenance(*f, ~uint64_t(0));
    if (!cache.ok()) Fail("kv rm", cache.status());
    Status s = (*cache)->Remove(f->key);
    if (!s.ok()) Fail("kv rm", s);
    std::printf("removed %s\n", f->key.c_str());
  });

  auto* gc = kv->add_subcommand("gc", "Evict by value until the directory fits a budget");
  add_dir(gc);
  gc->add_option("--kv-disk-space-mb,--budget-mb", f->budget_mb,
                 "the budget in MiB (as serve's --kv-disk-space-mb)")
      ->required();
  gc->callback([f] {
    auto before = InspectCacheDirectory(f->dir);
    if (!before.ok()) Fail("kv gc", before.status());
    auto cache = OpenForMaintenance(*f, ~uint64_t(0));
    if (!cache.ok()) Fail("kv gc", cache.status());
    auto n = (*cache)->Collect(f->budget_mb << 20);
    if (!n.ok()) Fail("kv gc", n.status());
    // Both sizes counted the way `kv ls` counts them (every file in the directory).
    auto after = InspectCacheDirectory(f->dir);
    if (!after.ok()) Fail("kv gc", after.status());
    std::printf("evicted %d file(s): %.1f MiB -> %.1f MiB (budget %llu MiB)\n", *n,
                Mib(before->total_bytes), Mib(after->total_bytes),
                static_cast<unsigned long long>(f->budget_mb));
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(80, RegisterKv);

}  // namespace flashkv::cli
