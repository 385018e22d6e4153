// Test helper: builds `.safetensors` bytes (and checkpoint directories) from named tensors,
// laid out as the safetensors library writes them (JSON header padded with spaces to a
// multiple of 8, tensors back to back in insertion order).
#pragma once

#include <unistd.h>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashkv::testing {

class SafetensorsBuilder {
 public:
  SafetensorsBuilder& Add(const std::string& name, const std::string& dtype,
                          std::vector<uint64_t> shape, std::vector<uint8_t> bytes) {
    entries_.push_back({name, dtype, std::move(shape), std::move(bytes)});
    return *this;
  }
  SafetensorsBuilder& AddF32(const std::string& name, std::vector<uint64_t> shape,
                             const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return Add(name, "F32", std::move(shape), std::move(b));
  }
  SafetensorsBuilder& AddI64(const std::string& name, std::vector<uint64_t> shape,
                             const std::vector<int64_t>& v) {
    std::vector<uint8_t> b(v.size() * 8);
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return Add(name, "I64", std::move(shape), std::move(b));
  }
  SafetensorsBuilder& Metadata(const std::string& k, const std::string& v) {
    metadata_[k] = v;
    return *this;
  }

  std::vector<uint8_t> Build() const {
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    if (!metadata_.empty()) h["__metadata__"] = metadata_;
    uint64_t off = 0;
    for (const auto& e : entries_) {
      h[e.name] = {
          {"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {off, off + e.bytes.size()}}};
      off += e.bytes.size();
    }
    std::string text = h.dump();
    while (text.size() % 8) text += ' ';
    uint64_t n = text.size();
    std::vector<uint8_t> out(8 + n + off);
    std::memcpy(out.data(), &n, 8);
    std::memcpy(out.data() + 8, text.data(), n);
    size_t at = 8 + n;
    for (const auto& e : entries_) {
      if (!e.bytes.empty()) std::memcpy(out.data() + at, e.bytes.data(), e.bytes.size());
      at += e.bytes.size();
    }
    return out;
  }

  void WriteTo(const std::filesystem::path& path) const {
    std::vector<uint8_t> b = Build();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }

 private:
  struct Entry {
    std::string name, dtype;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

inline std::string HfTinyDir() {
  return std::string(FLASHKV_FIXTURES_DIR) + "/hf-tiny-a";
}

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ =
        std::filesystem::temp_directory_path() /
        ("flashkv_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

}  // namespace flashkv::testing
