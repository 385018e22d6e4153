#include "cli/kv_remote_flags.h"

#include <algorithm>

#include "kv_remote/remote_address.h"
#include "util/file_io.h"

namespace flashkv::cli {

void AddKvRemoteFlags(CLI::App* cmd, KvRemoteFlags* flags) {
  cmd->add_option("--kv-remote", flags->url,
                  "shared KV tier on a RESP store (Redis, a Redis Cluster node, any RESP "
                  "server): redis://HOST:PORT[/DB]. Disk saves are mirrored there; prefixes "
                  "other servers computed are fetched when the local tiers miss (needs "
                  "--kv-disk-dir)");
  cmd->add_option("--kv-remote-timeout-ms", flags->timeout_ms,
                  "deadline of each command to the shared KV store and of a whole lookup "
                  "(index, record, every object; connect: a quarter of it) — set it above the "
                  "time the largest entry takes to fetch; a store this slow is retried with "
                  "backoff while serving goes on")
      ->capture_default_str();
  cmd->add_option("--kv-remote-key-file", flags->key_file,
                  "a file holding the shared tier's secret (16 bytes or more; a trailing "
                  "newline is ignored): every value written is signed with it (HMAC-SHA-256) "
                  "and values unsigned or signed with another key are refused. Every server "
                  "sharing the store needs the same file (docs/KV_FORMAT.md \"Trust model\")");
}

Expected<std::unique_ptr<RemoteTier>> OpenRemoteTier(const KvRemoteFlags& flags,
                                                     const SnapshotIdentity& identity) {
  FLASHKV_ASSIGN_OR_RETURN(RemoteAddress address, ParseRemoteAddress(flags.url));
  if (flags.timeout_ms < 10 || flags.timeout_ms > 600000) {
    return InvalidArgument("--kv-remote-timeout-ms must be 10..600000, got {}", flags.timeout_ms);
  }
  RemoteTierOptions o;
  o.store.address = address;
  o.store.model = identity.model;
  o.store.command_timeout_ms = flags.timeout_ms;
  o.store.connect_timeout_ms = std::max(10, flags.timeout_ms / 4);
  o.numerics = identity.numerics;
  if (!flags.key_file.empty()) {
    Expected<std::string> secret = ReadWholeFile(flags.key_file);
    if (!secret.ok()) {
      return InvalidArgument("--kv-remote-key-file: {}", secret.status().message());
    }
    while (!secret->empty() && (secret->back() == '\n' || secret->back() == '\r')) {
      secret->pop_back();
    }
    if (secret->size() < 16 || secret->size() > 4096) {
      return InvalidArgument(
          "--kv-remote-key-file {}: a secret of 16 to 4096 bytes is needed, "
          "it holds {}",
          flags.key_file, secret->size());
    }
    o.store.secret = std::move(*secret);
  }
  return std::make_unique<RemoteTier>(o);
}

}  // namespace flashkv::cli
