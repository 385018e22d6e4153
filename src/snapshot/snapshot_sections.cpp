// kv's own extension sections of a snapshot (snapshot_format.h kSnapshotTailTag,
// kSnapshotReplayTag; docs/KV_FORMAT.md): SnapshotContent's tail and replay map to and
// from the extension rows the codec writes and reads.
#include <cstdint>

#include "snapshot/snapshot_codec.h"

namespace flashkv {

std::vector<SnapshotExtension> SnapshotExtensionsOf(const SnapshotContent& content) {
  std::vector<SnapshotExtension> out;
  if (!content.tail.empty()) {
    std::string bytes;
    bytes.reserve(content.tail.size() * 4);
    for (int32_t id : content.tail) {
      for (int b = 0; b < 4; ++b) bytes.push_back(char((uint32_t(id) >> (8 * b)) & 0xff));
    }
    out.push_back({kSnapshotTailTag, std::move(bytes)});
  }
  if (!content.replay.empty()) out.push_back({kSnapshotReplayTag, std::string(content.replay)});
  out.insert(out.end(), content.extensions.begin(), content.extensions.end());
  return out;
}

Status TakeKvSections(std::vector<SnapshotExtension>* extensions, std::vector<int32_t>* tail,
                      std::string* replay) {
  tail->clear();
  replay->clear();
  std::vector<SnapshotExtension> own;
  for (SnapshotExtension& e : *extensions) {
    if (e.tag == kSnapshotReplayTag) {
      *replay = std::move(e.bytes);
    } else if (e.tag == kSnapshotChunksTag) {
      return Corrupt("chunk list section outside a version-2 manifest's first extension");
    } else if (e.tag == kSnapshotTailTag) {
      if (e.bytes.size() % 4 != 0) {
        return Corrupt("tail section of {} bytes is not whole u32 ids", e.bytes.size());
      }
      for (size_t i = 0; i < e.bytes.size(); i += 4) {
        uint32_t v = 0;
        for (int b = 0; b < 4; ++b) v |= uint32_t(uint8_t(e.bytes[i + size_t(b)])) << (8 * b);
        if (v > uint32_t(INT32_MAX)) return Corrupt("tail id {} at index {} is negative", v, i / 4);
        tail->push_back(int32_t(v));
      }
    } else {
      own.push_back(std::move(e));
    }
  }
  *extensions = std::move(own);
  return Status::Ok();
}

}  // namespace flashkv
