// `flashkv serve`'s shared KV tier flags (--kv-remote, --kv-remote-timeout-ms,
// --kv-remote-key-file) and opening
// the tier they describe for one model identity. Must not: connect (the tier connects on
// first use, so a store down at start only means misses until it answers).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "kv_remote/remote_tier.h"
#include "snapshot/snapshot_format.h"
#include "util/status.h"

namespace flashkv::cli {

struct KvRemoteFlags {
  std::string url;  // empty: no shared tier
  int timeout_ms = 2000;
  std::string key_file;  // the shared secret values are signed with; empty: unsigned
};

void AddKvRemoteFlags(CLI::App* cmd, KvRemoteFlags* flags);

// kInvalidArgument for a malformed address or timeout, or a key file that cannot be read
// or holds fewer than 16 bytes.
Expected<std::unique_ptr<RemoteTier>> OpenRemoteTier(const KvRemoteFlags& flags,
                                                     const SnapshotIdentity& identity);

}  // namespace flashkv::cli
