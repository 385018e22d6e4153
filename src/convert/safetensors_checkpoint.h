// A Hugging Face checkpoint's weights as one name -> tensor table over one or more
// `.safetensors` files: a single file, a directory with `model.safetensors.index.json`
// (its weight_map names the shard of every tensor), or a directory whose `*.safetensors`
// files are all taken. Must not: know model structure.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "convert/safetensors_file.h"
#include "util/status.h"

namespace flashkv {

class SafetensorsCheckpoint {
 public:
  // `path` is a .safetensors file or a checkpoint directory. A tensor name present in two
  // shards, a weight_map entry naming a missing shard or a tensor its shard does not hold
  // are errors.
  static Expected<SafetensorsCheckpoint> Open(const std::string& path);

  // Sorted.
  std::vector<std::string> names() const;
  size_t size() const { return index_.size(); }
  const SafetensorsTensor* Find(std::string_view name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  Status AddFile(std::unique_ptr<SafetensorsFile> file);

  // unique_ptr keeps each file's address stable, so index_ entries stay valid.
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::pair<std::string, const SafetensorsTensor*>> index_;  // sorted by name
};

}  // namespace flashkv
