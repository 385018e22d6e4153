// ByteSink / ByteSource: where an encoder's bytes go and a decoder's come from, so that a
// format is written and parsed once whatever holds the bytes — a file, host memory, a value
// fetched from a store (the idea of llama.cpp's llama-io.h: llama_io_write_i /
// llama_io_read_i). The snapshot codec writes and reads its container through these
// (snapshot/snapshot_codec.h WriteSnapshotImage, ReadSnapshotHeader, ReadSnapshotSection).
// Must not: know about formats. A source's reads are positioned (the snapshot container
// is read by section offset, docs/KV_FORMAT.md); a sink's writes append.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/file_io.h"
#include "util/status.h"

namespace flashkv {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Appends n bytes at `src`; an error leaves the sink's contents unspecified.
  virtual Status Write(const void* src, size_t n) = 0;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Bytes the source holds.
  virtual Expected<uint64_t> Size() const = 0;
  // Reads n bytes at `offset`; kCorrupt "truncated" when the source ends before them (as
  // File::ReadAt), so a short value reads like a short file.
  virtual Status ReadAt(uint64_t offset, void* dst, size_t n) const = 0;
  // What the errors name (a path, or what the bytes are).
  virtual std::string_view name() const = 0;
};

// Appends to an open file (File::Write: finishes short writes, retries EINTR).
class FileSink final : public ByteSink {
 public:
  explicit FileSink(File& file) : file_(file) {}
  Status Write(const void* src, size_t n) override { return file_.Write(src, n); }

 private:
  File& file_;
};

// Appends to a string in memory.
class StringSink final : public ByteSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  Status Write(const void* src, size_t n) override;

 private:
  std::string* out_;
};

// Positioned reads of an open file.
class FileSource final : public ByteSource {
 public:
  explicit FileSource(const File& file) : file_(file) {}
  Expected<uint64_t> Size() const override { return file_.Size(); }
  Status ReadAt(uint64_t offset, void* dst, size_t n) const override {
    return file_.ReadAt(offset, dst, n);
  }
  std::string_view name() const override { return file_.path(); }

 private:
  const File& file_;
};

// Positioned reads of bytes in memory, which must outlive the source.
class MemorySource final : public ByteSource {
 public:
  MemorySource(std::string_view bytes, std::string_view name) : bytes_(bytes), name_(name) {}
  Expected<uint64_t> Size() const override { return uint64_t(bytes_.size()); }
  Status ReadAt(uint64_t offset, void* dst, size_t n) const override;
  std::string_view name() const override { return name_; }

 private:
  std::string_view bytes_;
  std::string_view name_;
};

}  // namespace flashkv
