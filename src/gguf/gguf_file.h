// A GGUF v3 file opened for reading: header, metadata and tensor directory are parsed and
// validated up front; tensor bytes stay in place (a read-only mmap, or an owned buffer for
// tests) and are reached through GgufTensorInfo::data. Must not: interpret tensor math or
// know model structure (keys and tensor names are plain strings here).
//
// Everything is parsed through a bounds-checked cursor, so a truncated or hostile file
// yields a Corrupt/Unsupported status naming the problem and the byte offset, never a read
// out of bounds. Metadata values are decoded on demand from the validated bytes, so a
// 129k-string vocabulary costs nothing until someone asks for it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_types.h"
#include "tensor/dtype.h"
#include "util/mapped_file.h"
#include "util/status.h"

namespace flashkv {

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ne[0] contiguous (row) dimension, GGML order
  DType type;
  uint64_t offset;  // relative to the data section
  uint64_t nbytes;
  const uint8_t* data;  // points into the mapping / owned buffer
};

struct GgufArrayInfo {
  GgufType elem_type;
  uint64_t count;
};

class GgufFile {
 public:
  // mmap read-only and parse header + metadata + tensor infos. Errors carry the path.
  static Expected<GgufFile> Open(const std::string& path);
  // The same parser over an owned buffer (tests, in-memory round trips).
  static Expected<GgufFile> FromBytes(std::vector<uint8_t> bytes);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Absolute file offset where the data section starts.
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }
  // The path given to Open; empty for FromBytes.
  const std::string& path() const { return path_; }

  bool Has(std::string_view key) const;
  std::vector<std::string> keys() const;  // file order

  // The stored type of a key; NotFound if absent.
  Expected<GgufType> TypeOf(std::string_view key) const;
  // Element type and length of an array key; an error if absent or not an array.
  Expected<GgufArrayInfo> ArrayInfo(std::string_view key) const;

  Expected<uint64_t> GetU64(std::string_view key) const;  // any integer type that is >= 0 and fits
  Expected<int64_t> GetI64(std::string_view key) const;   // any integer type that fits
  // f32, f64 or any integer (ds4 allows ints for floats).
  Expected<double> GetF64(std::string_view key) const;
  Expected<bool> GetBool(std::string_view key) const;
  Expected<std::string> GetString(std::string_view key) const;
  Expected<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  Expected<std::vector<double>> GetFloatArray(std::string_view key) const;  // float or int arrays
  Expected<std::vector<std::string>> GetStringArray(std::string_view key) const;

  // A one-line human rendering of a value ("u32 5", "array<string>[1024] ["<s>", ...]"),
  // at most `max_elems` array elements shown. For dumps and error messages.
  std::string Describe(std::string_view key, size_t max_elems = 8) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

 private:
  // One metadata record; the value is decoded from the buffer on demand.
  struct Kv {
    std::string key;
    GgufType type;
    GgufType elem_type;  // arrays only
    uint64_t count;      // arrays only
    uint64_t value_pos;  // absolute offset of the value (for arrays: of the first element)
  };

  GgufFile() = default;
  Status ParseAll();
  Expected<const Kv*> FindKv(std::string_view key) const;

  MappedFile map_;
  std::vector<uint8_t> owned_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;

  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<Kv> kvs_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace flashkv
