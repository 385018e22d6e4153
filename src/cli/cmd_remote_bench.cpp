// `flashkv remote-bench`: the shared KV tier's transfer rate against a running RESP store
// — one object of --mib MiB stored in parts and read back --rounds times through
// RemoteStore, every part's frame checked (CRC-32C, fingerprint, length) as a remote hit
// does. The numbers docs/PERFORMANCE.md puts next to `redis-benchmark`'s raw GET rate.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "cli/commands.h"
#include "kv_remote/remote_address.h"
#include "kv_remote/remote_store.h"

namespace flashkv::cli {
namespace {

struct RemoteBenchFlags {
  std::string url;
  int mib = 256;
  int part_mib = 32;
  int rounds = 3;
  int timeout_ms = 60000;
};

Status RunRemoteBench(const RemoteBenchFlags& f) {
  FLASHKV_ASSIGN_OR_RETURN(RemoteAddress address, ParseRemoteAddress(f.url));
  if (f.mib < 1 || f.part_mib < 1 || f.rounds < 1) {
    return InvalidArgument("--mib, --part-mib and --rounds must be positive");
  }
  RemoteStoreOptions o;
  o.address = address;
  o.model = Sha1Of("flashkv remote-bench");
  o.part_bytes = uint64_t(f.part_mib) << 20;
  o.command_timeout_ms = f.timeout_ms;
  o.connect_timeout_ms = 2000;
  RemoteStore store(o);
  FLASHKV_RETURN_IF_ERROR(store.Ping());
  std::string data(size_t(f.mib) << 20, '\0');
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  using Clock = std::chrono::steady_clock;
  auto mibps = [&](Clock::time_point t0) {
    return double(f.mib) / std::chrono::duration<double>(Clock::now() - t0).count();
  };
  const std::string name = "remote-bench.bin";
  const auto tw = Clock::now();
  FLASHKV_RETURN_IF_ERROR(store.PutObject(name, data));
  std::printf("write %d MiB in %d MiB parts: %.0f MiB/s\n", f.mib, f.part_mib, mibps(tw));
  for (int r = 0; r < f.rounds; ++r) {
    const auto t0 = Clock::now();
    FLASHKV_ASSIGN_OR_RETURN(std::string back, store.GetObject(name, data.size()));
    const double rate = mibps(t0);
    if (back != data) return Corrupt("the object read back differs");
    std::printf("read+verify round %d: %.0f MiB/s\n", r + 1, rate);
  }
  return Status::Ok();
}

void RegisterRemoteBench(CLI::App& app) {
  auto f = std::make_shared<RemoteBenchFlags>();
  auto* cmd = app.add_subcommand(
      "remote-bench", "Measure the shared KV tier's write and verified read rate on a RESP store");
  cmd->add_option("--kv-remote", f->url, "redis://HOST:PORT[/DB]")->required();
  cmd->add_option("--mib", f->mib, "object size (MiB)")->capture_default_str();
  cmd->add_option("--part-mib", f->part_mib, "part size (MiB)")->capture_default_str();
  cmd->add_option("--rounds", f->rounds, "reads")->capture_default_str();
  cmd->add_option("--timeout-ms", f->timeout_ms, "command timeout")->capture_default_str();
  cmd->callback([f] {
    Status s = RunRemoteBench(*f);
    if (!s.ok()) Fail("remote-bench", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(85, RegisterRemoteBench);

}  // namespace flashkv::cli
