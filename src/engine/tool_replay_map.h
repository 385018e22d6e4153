// ToolReplayMap: the exact-DSML replay memory (docs/SERVER.md §4). Every tool call the model makes
// gets an unguessable id; the map remembers id → the exact DSML block the model sampled,
// so when a client resends the calls as JSON (keys reordered, values re-encoded) the
// prompt renders the sampled bytes verbatim and the prefix still matches the KV. Bounded
// LRU over ids (and total block bytes); blocks shared by parallel calls are stored once.
// Also the byte format of the map inside snapshot files ("KTM" trailer, docs/SERVER.md §3.3), so
// the disk tier can persist it as opaque bytes. Must not: render prompts or touch files.
//
// Threading: all methods are thread-safe (HTTP threads resolve while the worker records).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "chat/chat_message.h"
#include "util/status.h"

namespace flashkv {

// prefix + 32 random lowercase hex digits (std::random_device): tool-call ids ("call_",
// "toolu_") and response ids.
std::string NewRandomId(std::string_view prefix);

class ToolReplayMap {
 public:
  static constexpr size_t kDefaultMaxIds = 100000;
  static constexpr size_t kDefaultMaxBytes = size_t(512) << 20;

  explicit ToolReplayMap(size_t max_ids = kDefaultMaxIds, size_t max_bytes = kDefaultMaxBytes);

  // Maps each id to `dsml_block` (the whole block of the turn; parallel calls share it).
  void Remember(std::span<const std::string> ids, std::string_view dsml_block);

  // The block every id maps to, or nullopt when one is unknown or they differ.
  std::optional<std::string> Resolve(std::span<const std::string> ids);

  // Sets raw_dsml of each assistant message whose calls all resolve to one block (and whose
  // raw_dsml is empty). Returns how many messages got exact bytes.
  int ApplyTo(std::vector<ChatMessage>* messages);

  size_t size() const;
  size_t bytes() const;

  // The KTM trailer for a snapshot of `rendered_text`: only entries whose block occurs
  // verbatim in the text. Empty string when there are none.
  std::string EncodeTrailer(std::string_view rendered_text) const;
  // Merges a KTM trailer's entries (read from disk). Stops at the first malformed entry,
  // keeping what was read; Corrupt names the entry and offset. Returns entries read.
  Expected<size_t> DecodeTrailer(std::string_view bytes);

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<const std::string> block;
  };
  void RememberLocked(const std::string& id, std::shared_ptr<const std::string> block);
  std::shared_ptr<const std::string> InternLocked(std::string_view block);
  void EvictLocked();

  const size_t max_ids_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> by_id_;
  struct Block {
    std::shared_ptr<const std::string> data;
    size_t refs = 0;  // ids mapping to it; dropped at 0
  };
  void ReleaseLocked(const Entry& e);
  // Interned blocks, keyed by a view into their own data.
  std::unordered_map<std::string_view, Block> blocks_;
  size_t bytes_ = 0;  // ids + distinct blocks
};

}  // namespace flashkv
