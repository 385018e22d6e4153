#include "snapshot/cache_names.h"

#include "util/file_io.h"

namespace flashkv {

std::string SnapshotFileName(const Sha1Digest& key) {
  return Sha1Hex(key) + std::string(kSnapshotSuffix);
}

bool ParseSnapshotFileName(std::string_view name, Sha1Digest* key) {
  if (name.size() != 40 + kSnapshotSuffix.size() || !name.ends_with(kSnapshotSuffix)) return false;
  return ParseSha1Hex(name.substr(0, 40), key);
}

std::string ChunkFileName(const Sha1Digest& name) {
  return Sha1Hex(name) + std::string(kChunkSuffix);
}

bool ParseChunkFileName(std::string_view file_name, Sha1Digest* name) {
  if (file_name.size() != 40 + kChunkSuffix.size() || !file_name.ends_with(kChunkSuffix)) {
    return false;
  }
  const std::string_view hex = file_name.substr(0, 40);
  // Lowercase only: the one spelling ChunkFileName makes.
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return ParseSha1Hex(hex, name);
}

std::string ChunkDirOf(const std::string& cache_dir) {
  return JoinPath(cache_dir, kChunkDirName);
}

std::string TempPathFor(std::string_view final_path, std::string_view tag) {
  std::string path(final_path);
  path += kTempMarker;
  path += tag;
  return path;
}

}  // namespace flashkv
