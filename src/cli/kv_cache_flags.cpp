#include "cli/kv_cache_flags.h"

#include "cli/model_flags.h"

namespace flashkv::cli {

void AddKvDiskFlags(CLI::App* cmd, KvDiskFlags* flags, const std::string& dir_help) {
  cmd->add_option("--kv-disk-dir", flags->dir, dir_help);
  cmd->add_option("--kv-disk-space-mb", flags->space_mb, "disk KV cache budget (MiB)")
      ->capture_default_str();
  cmd->add_option("--kv-quarantine", flags->quarantine,
                  "on: move damaged cache files to quarantine/; off: delete them")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--kv-disk-direct", flags->direct,
                  "on: write snapshots and read their chunk files with O_DIRECT where the "
                  "filesystem has it (fast, keeps the model's pages cached); off: through the "
                  "page cache (a load right after a save is served from RAM)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--kv-disk-chunk-tokens", flags->chunk_tokens,
                  "tokens per content-addressed chunk: saves write only chunks not yet stored "
                  "plus a manifest (format v2); 0: no chunks, the whole state in each manifest")
      ->capture_default_str();
  cmd->add_option("--kv-disk-write-budget-gb-per-day", flags->write_budget_gb_per_day,
                  "at most this many GB written to the disk cache in any 24 hours; saves "
                  "beyond it are skipped (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--kv-disk-min-tokens-per-mib", flags->min_tokens_per_mib,
                  "skip saves that spare fewer prefill tokens per MiB they write (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CachePolicyOptions& p = flags->policy;
  cmd->add_option("--kv-cache-min-tokens", p.min_tokens,
                  "never save or load snapshots shorter than this")
      ->capture_default_str();
  cmd->add_option("--kv-cache-cold-max-tokens", p.cold_max_tokens,
                  "cold saves only for first prompts up to this long (0: off)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-continued-interval-tokens", p.continued_interval_tokens,
                  "spacing of continued snapshots (0: off)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-boundary-trim-tokens", p.boundary_trim_tokens,
                  "tail tokens trimmed before a cold boundary")
      ->capture_default_str();
  cmd->add_option("--kv-cache-boundary-align-tokens", p.boundary_align_tokens,
                  "align cold and continued boundaries to this (0: off)")
      ->capture_default_str();
}

Expected<std::unique_ptr<DiskCache>> OpenDiskCache(const KvDiskFlags& flags,
                                                   const ModelSetup& setup) {
  FLASHKV_ASSIGN_OR_RETURN(Sha1Digest fingerprint, SetupFingerprint(setup));
  return OpenDiskCache(flags, CacheIdentity(fingerprint, setup.options));
}

Expected<std::unique_ptr<DiskCache>> OpenDiskCache(const KvDiskFlags& flags,
                                                   const SnapshotIdentity& identity) {
  if (flags.quarantine != "on" && flags.quarantine != "off") {
    return InvalidArgument("--kv-quarantine must be on or off, got '{}'", flags.quarantine);
  }
  if (flags.direct != "on" && flags.direct != "off") {
    return InvalidArgument("--kv-disk-direct must be on or off, got '{}'", flags.direct);
  }
  DiskCacheOptions o;
  o.dir = flags.dir;
  o.budget_bytes = flags.space_mb << 20;
  o.quarantine = flags.quarantine == "on";
  o.write.direct = flags.direct == "on";
  o.load.direct = o.write.direct;
  o.identity = identity;
  o.chunk_tokens = flags.chunk_tokens;
  o.write_budget_bytes_per_day = uint64_t(flags.write_budget_gb_per_day * 1e9);
  o.min_tokens_per_mib = flags.min_tokens_per_mib;
  return DiskCache::Open(o);
}

}  // namespace flashkv::cli
