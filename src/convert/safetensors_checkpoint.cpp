#include "convert/safetensors_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace flashkv {
namespace {

namespace fs = std::filesystem;
constexpr const char* kIndexName = "model.safetensors.index.json";

Expected<std::string> ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open {}", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("cannot read {}", path.string());
  return ss.str();
}

}  // namespace

Status SafetensorsCheckpoint::AddFile(std::unique_ptr<SafetensorsFile> file) {
  for (const SafetensorsTensor& t : file->tensors()) index_.emplace_back(t.name, &t);
  files_.push_back(std::move(file));
  return Status::Ok();
}

Expected<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(const std::string& path) {
  SafetensorsCheckpoint ck;
  std::error_code ec;
  const fs::path root(path);
  if (!fs::is_directory(root, ec)) {
    FLASHKV_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
    FLASHKV_RETURN_IF_ERROR(ck.AddFile(std::make_unique<SafetensorsFile>(std::move(f))));
  } else if (fs::exists(root / kIndexName, ec)) {
    const fs::path index_path = root / kIndexName;
    FLASHKV_ASSIGN_OR_RETURN(std::string text, ReadText(index_path));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object())
      return Corrupt("{}: not JSON with a weight_map object", index_path.string());
    std::map<std::string, std::string> weight_map;
    std::set<std::string> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        return Corrupt("{}: weight_map entry '{}' is not a file name", index_path.string(),
                       it.key());
      std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos || shard == "..")
        return Corrupt("{}: shard name '{}' is not a plain file name", index_path.string(), shard);
      weight_map[it.key()] = shard;
      shards.insert(shard);
    }
    std::map<std::string, const SafetensorsFile*> by_shard;
    for (const std::string& shard : shards) {
      FLASHKV_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open((root / shard).string()));
      auto owned = std::make_unique<SafetensorsFile>(std::move(f));
      by_shard[shard] = owned.get();
      FLASHKV_RETURN_IF_ERROR(ck.AddFile(std::move(owned)));
    }
    for (const auto& [name, shard] : weight_map)
      if (!by_shard[shard]->Find(name))
        return Corrupt("{}: weight_map puts '{}' in {}, which does not hold it",
                       index_path.string(), name, shard);
  } else {
    std::vector<fs::path> paths;
    for (const auto& entry : fs::directory_iterator(root, ec))
      if (entry.is_regular_file() && entry.path().extension() == ".safetensors")
        paths.push_back(entry.path());
    if (ec) return IoError("cannot list {}: {}", path, ec.message());
    if (paths.empty()) return NotFound("no .safetensors files in {}", path);
    std::sort(paths.begin(), paths.end());
    for (const fs::path& p : paths) {
      FLASHKV_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(p.string()));
      FLASHKV_RETURN_IF_ERROR(ck.AddFile(std::make_unique<SafetensorsFile>(std::move(f))));
    }
  }
  std::sort(ck.index_.begin(), ck.index_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < ck.index_.size(); ++i)
    if (ck.index_[i].first == ck.index_[i - 1].first)
      return Corrupt("tensor '{}' appears in more than one safetensors file of {}",
                     ck.index_[i].first, path);
  return ck;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, t] : index_) out.push_back(name);
  return out;
}

const SafetensorsTensor* SafetensorsCheckpoint::Find(std::string_view name) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), name,
                             [](const auto& e, std::string_view n) { return e.first < n; });
  return (it != index_.end() && it->first == name) ? it->second : nullptr;
}

}  // namespace flashkv
