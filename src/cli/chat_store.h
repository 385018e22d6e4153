// ChatStore: the saved conversations of `flashkv chat` — one JSON file per name (system
// prompt, thinking mode, messages) in a directory of its own. Names are checked, never
// used as paths: letters, digits, '-', '_' and '.', 1 to 64 of them, not starting with '.',
// so "/save ../../etc/x" cannot write outside it. The KV of a saved conversation lives in
// the disk KV cache, keyed by its tokens; this store only holds the text to render again.
// Must not: run the model or touch the KV cache.
#pragma once

#include <string>
#include <vector>

#include "chat/chat_message.h"
#include "util/status.h"

namespace flashkv::cli {

struct SavedChat {
  std::string system;
  bool think = false;
  std::vector<ChatMessage> messages;  // user and assistant turns, in order
};

class ChatStore {
 public:
  explicit ChatStore(std::string dir) : dir_(std::move(dir)) {}

  // InvalidArgument naming the rule when `name` is not a valid chat name.
  static Status CheckName(const std::string& name);

  Status Save(const std::string& name, const SavedChat& chat) const;
  Expected<SavedChat> Load(const std::string& name) const;
  // Saved names, sorted.
  Expected<std::vector<std::string>> List() const;

  const std::string& dir() const { return dir_; }

 private:
  std::string PathFor(const std::string& name) const;
  std::string dir_;
};

}  // namespace flashkv::cli
