// Builds a GGUF v3 file: metadata and tensors are written in insertion order, tensor data
// aligned to general.alignment (32 unless set). Used by `flashkv convert` and `make-tiny`.
// Must not: know model structure or quantize (callers hand in finished tensor bytes).
//
// Write() goes to <path>.tmp, fsyncs, renames over <path> and fsyncs the directory (with
// util/file_io.h), so a crash never leaves a half-written model under the final name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_types.h"
#include "tensor/dtype.h"
#include "util/status.h"

namespace flashkv {

class GgufWriter {
 public:
  // Produces a tensor's bytes when Write() reaches it; lets a converter hold one tensor in
  // memory at a time. The result must have exactly the declared size.
  using TensorProducer = std::function<Expected<std::vector<uint8_t>>()>;
  // Called after each tensor's data is written: (tensors done, total, name).
  using ProgressFn = std::function<void(size_t, size_t, const std::string&)>;

  // Setting a key again replaces its value and keeps its original position.
  void SetU8(std::string key, uint8_t v);
  void SetI8(std::string key, int8_t v);
  void SetU16(std::string key, uint16_t v);
  void SetI16(std::string key, int16_t v);
  void SetU32(std::string key, uint32_t v);
  void SetI32(std::string key, int32_t v);
  void SetU64(std::string key, uint64_t v);
  void SetI64(std::string key, int64_t v);
  void SetF32(std::string key, float v);
  void SetF64(std::string key, double v);
  void SetBool(std::string key, bool v);
  void SetString(std::string key, std::string v);
  void SetU8Array(std::string key, std::vector<uint8_t> v);
  void SetI8Array(std::string key, std::vector<int8_t> v);
  void SetU16Array(std::string key, std::vector<uint16_t> v);
  void SetI16Array(std::string key, std::vector<int16_t> v);
  void SetI32Array(std::string key, std::vector<int32_t> v);
  void SetU32Array(std::string key, std::vector<uint32_t> v);
  void SetI64Array(std::string key, std::vector<int64_t> v);
  void SetU64Array(std::string key, std::vector<uint64_t> v);
  void SetF32Array(std::string key, std::vector<float> v);
  void SetF64Array(std::string key, std::vector<double> v);
  void SetBoolArray(std::string key, std::vector<bool> v);
  void SetStringArray(std::string key, std::vector<std::string> v);

  // Checks the name (non-empty, unique, < 64 bytes as GGML requires), 1..4 non-zero dims
  // with ne[0] a whole number of blocks, and data.size() == TensorBytes(type, ne).
  Status AddTensor(std::string name, DType type, std::vector<uint64_t> ne,
                   std::vector<uint8_t> data);
  // Same checks on the shape now; the producer's output is checked when Write() calls it.
  Status AddTensorDeferred(std::string name, DType type, std::vector<uint64_t> ne,
                           TensorProducer produce);

  size_t tensor_count() const { return tensors_.size(); }
  size_t key_count() const { return kvs_.size(); }

  // Writes <path>.tmp, fsync, rename. On failure the temp file is removed.
  Status Write(const std::string& path) const;
  Status Write(const std::string& path, const ProgressFn& progress) const;
  // The same bytes in memory (tests).
  Expected<std::vector<uint8_t>> WriteToBytes() const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<uint64_t> ne;
    uint64_t nbytes;
    std::vector<uint8_t> data;  // empty when `produce` is set
    TensorProducer produce;
  };
  // Receives the file's bytes in order (a buffered fd or a vector).
  using AppendFn = std::function<Status(const uint8_t*, size_t)>;

  // `encoded` is the u32 value type followed by the value payload.
  void SetEncoded(std::string key, std::vector<uint8_t> encoded);
  Expected<uint64_t> CheckTensor(const std::string& name, DType type,
                                 const std::vector<uint64_t>& ne) const;
  Expected<uint64_t> Alignment() const;
  Status WriteTo(const AppendFn& append, const ProgressFn& progress) const;
  // Creates `path` (0644 less the umask), writes every byte and fsyncs it.
  Status WriteFile(const std::string& path, const ProgressFn& progress) const;

  std::vector<std::pair<std::string, std::vector<uint8_t>>> kvs_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace flashkv
