#include "gguf/gguf_writer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "util/file_io.h"

namespace flashkv {
namespace {

// GGML_MAX_NAME is 64 including the terminating NUL.
constexpr size_t kMaxTensorName = 63;

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void PutString(std::vector<uint8_t>& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  size_t at = out.size();
  out.resize(at + s.size());
  if (!s.empty()) std::memcpy(out.data() + at, s.data(), s.size());
}

template <typename T>
std::vector<uint8_t> EncodeScalar(GgufType type, T v) {
  std::vector<uint8_t> out;
  Put<uint32_t>(out, static_cast<uint32_t>(type));
  Put<T>(out, v);
  return out;
}

template <typename T>
std::vector<uint8_t> EncodeArray(GgufType elem, const std::vector<T>& v) {
  std::vector<uint8_t> out;
  out.reserve(4 + 4 + 8 + v.size() * sizeof(T));
  Put<uint32_t>(out, static_cast<uint32_t>(GgufType::kArray));
  Put<uint32_t>(out, static_cast<uint32_t>(elem));
  Put<uint64_t>(out, v.size());
  for (const T& x : v) Put<T>(out, x);
  return out;
}

uint64_t AlignUp(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// The process umask without changing it (umask(2) can only be read by setting it, which
// races with other threads creating files); 022 where /proc does not say.
mode_t CurrentUmask() {
  unsigned mask = 022;
  if (std::FILE* f = std::fopen("/proc/self/status", "re")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f)) {
      if (std::sscanf(line, "Umask: %o", &mask) == 1) break;
    }
    std::fclose(f);
  }
  return static_cast<mode_t>(mask);
}

// Buffers small appends so the header is not written a few bytes at a time.
class FileSink {
 public:
  explicit FileSink(File& file) : file_(file) { buf_.reserve(kBuf); }
  Status Append(const uint8_t* p, size_t n) {
    if (buf_.size() + n > kBuf) FLASHKV_RETURN_IF_ERROR(Flush());
    if (n >= kBuf) return file_.Write(p, n);
    buf_.insert(buf_.end(), p, p + n);
    return Status::Ok();
  }
  Status Flush() {
    Status s = file_.Write(buf_.data(), buf_.size());
    buf_.clear();
    return s;
  }

 private:
  static constexpr size_t kBuf = size_t{4} << 20;
  File& file_;
  std::vector<uint8_t> buf_;
};

}  // namespace

void GgufWriter::SetEncoded(std::string key, std::vector<uint8_t> encoded) {
  auto it = kv_index_.find(key);
  if (it != kv_index_.end()) {
    kvs_[it->second].second = std::move(encoded);
    return;
  }
  kv_index_.emplace(key, kvs_.size());
  kvs_.emplace_back(std::move(key), std::move(encoded));
}

void GgufWriter::SetU8(std::string key, uint8_t v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kU8, v));
}
void GgufWriter::SetI8(std::string key, int8_t v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kI8, v));
}
void GgufWriter::SetU16(std::string key, uint16_t v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kU16, v));
}
void GgufWriter::SetI16(std::string key, int16_t v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kI16, v));
}
void GgufWriter::SetU32(std::string key, uint32_t v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kU32, v));
}
void GgufWriter::SetI32(std::string key, int32_t v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kI32, v));
}
void GgufWriter::SetU64(std::string key, uint64_t v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kU64, v));
}
void GgufWriter::SetI64(std::string key, int64_t v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kI64, v));
}
void GgufWriter::SetF32(std::string key, float v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kF32, v));
}
void GgufWriter::SetF64(std::string key, double v) {
  SetEncoded(std::move(key), EncodeScalar(GgufType::kF64, v));
}
void GgufWriter::SetBool(std::string key, bool v) {
  SetEncoded(std::move(key), EncodeScalar<uint8_t>(GgufType::kBool, v ? 1 : 0));
}
void GgufWriter::SetString(std::string key, std::string v) {
  std::vector<uint8_t> out;
  Put<uint32_t>(out, static_cast<uint32_t>(GgufType::kString));
  PutString(out, v);
  SetEncoded(std::move(key), std::move(out));
}
void GgufWriter::SetU8Array(std::string key, std::vector<uint8_t> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kU8, v));
}
void GgufWriter::SetI8Array(std::string key, std::vector<int8_t> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kI8, v));
}
void GgufWriter::SetU16Array(std::string key, std::vector<uint16_t> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kU16, v));
}
void GgufWriter::SetI16Array(std::string key, std::vector<int16_t> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kI16, v));
}
void GgufWriter::SetI32Array(std::string key, std::vector<int32_t> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kI32, v));
}
void GgufWriter::SetU32Array(std::string key, std::vector<uint32_t> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kU32, v));
}
void GgufWriter::SetI64Array(std::string key, std::vector<int64_t> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kI64, v));
}
void GgufWriter::SetU64Array(std::string key, std::vector<uint64_t> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kU64, v));
}
void GgufWriter::SetF32Array(std::string key, std::vector<float> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kF32, v));
}
void GgufWriter::SetF64Array(std::string key, std::vector<double> v) {
  SetEncoded(std::move(key), EncodeArray(GgufType::kF64, v));
}
void GgufWriter::SetBoolArray(std::string key, std::vector<bool> v) {
  std::vector<uint8_t> bytes(v.begin(), v.end());
  std::vector<uint8_t> out = EncodeArray(GgufType::kBool, bytes);
  SetEncoded(std::move(key), std::move(out));
}
void GgufWriter::SetStringArray(std::string key, std::vector<std::string> v) {
  std::vector<uint8_t> out;
  Put<uint32_t>(out, static_cast<uint32_t>(GgufType::kArray));
  Put<uint32_t>(out, static_cast<uint32_t>(GgufType::kString));
  Put<uint64_t>(out, v.size());
  for (const std::string& s : v) PutString(out, s);
  SetEncoded(std::move(key), std::move(out));
}

Expected<uint64_t> GgufWriter::CheckTensor(const std::string& name, DType type,
                                           const std::vector<uint64_t>& ne) const {
  if (name.empty()) return InvalidArgument("tensor name is empty");
  if (name.size() > kMaxTensorName)
    return InvalidArgument("tensor name '{}' is {} bytes; GGUF allows at most {}", name,
                           name.size(), kMaxTensorName);
  if (tensor_index_.count(name)) return InvalidArgument("duplicate tensor '{}'", name);
  if (ne.empty() || ne.size() > kGgufMaxDims)
    return InvalidArgument("tensor '{}': {} dimensions, expected 1..{}", name, ne.size(),
                           kGgufMaxDims);
  for (size_t d = 0; d < ne.size(); ++d)
    if (ne[d] == 0) return InvalidArgument("tensor '{}': dimension {} is 0", name, d);
  if (!FindDTypeInfo(static_cast<uint32_t>(type)))
    return InvalidArgument("tensor '{}': unknown type id {}", name, static_cast<uint32_t>(type));
  auto nbytes = TensorBytes(type, ne.data(), static_cast<int>(ne.size()));
  if (!nbytes.ok()) return nbytes.status().WithContext(fmt::format("tensor '{}'", name));
  return *nbytes;
}

Status GgufWriter::AddTensor(std::string name, DType type, std::vector<uint64_t> ne,
                             std::vector<uint8_t> data) {
  FLASHKV_ASSIGN_OR_RETURN(uint64_t nbytes, CheckTensor(name, type, ne));
  if (data.size() != nbytes)
    return InvalidArgument("tensor '{}': {} data bytes, but a {} tensor of this shape needs {}",
                           name, data.size(), GetDTypeInfo(type).name, nbytes);
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back(Tensor{std::move(name), type, std::move(ne), nbytes, std::move(data), {}});
  return Status::Ok();
}

Status GgufWriter::AddTensorDeferred(std::string name, DType type, std::vector<uint64_t> ne,
                                     TensorProducer produce) {
  FLASHKV_ASSIGN_OR_RETURN(uint64_t nbytes, CheckTensor(name, type, ne));
  if (!produce) return InvalidArgument("tensor '{}': no producer", name);
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back(Tensor{std::move(name), type, std::move(ne), nbytes, {}, std::move(produce)});
  return Status::Ok();
}

Expected<uint64_t> GgufWriter::Alignment() const {
  auto it = kv_index_.find(kGgufAlignmentKey);
  if (it == kv_index_.end()) return kGgufDefaultAlignment;
  const std::vector<uint8_t>& enc = kvs_[it->second].second;
  uint32_t type;
  std::memcpy(&type, enc.data(), 4);
  uint64_t a = 0;
  if (type == static_cast<uint32_t>(GgufType::kU32)) {
    uint32_t v;
    std::memcpy(&v, enc.data() + 4, 4);
    a = v;
  } else if (type == static_cast<uint32_t>(GgufType::kU64)) {
    std::memcpy(&a, enc.data() + 4, 8);
  } else {
    return InvalidArgument("general.alignment must be set as u32 (or u64)");
  }
  if (a == 0 || (a & (a - 1)) != 0)
    return InvalidArgument("general.alignment {} is not a power of two", a);
  return a;
}

Status GgufWriter::WriteTo(const AppendFn& append, const ProgressFn& progress) const {
  static const uint8_t kZeros[256] = {};
  FLASHKV_ASSIGN_OR_RETURN(uint64_t align, Alignment());
  std::vector<uint8_t> head;
  Put<uint32_t>(head, kGgufMagic);
  Put<uint32_t>(head, kGgufVersion);
  Put<uint64_t>(head, tensors_.size());
  Put<uint64_t>(head, kvs_.size());
  for (const auto& [key, enc] : kvs_) {
    PutString(head, key);
    head.insert(head.end(), enc.begin(), enc.end());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(head, t.name);
    Put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) Put<uint64_t>(head, n);
    Put<uint32_t>(head, static_cast<uint32_t>(t.type));
    Put<uint64_t>(head, offset);
    offset = AlignUp(offset + t.nbytes, align);
  }
  head.resize(AlignUp(head.size(), align), 0);
  FLASHKV_RETURN_IF_ERROR(append(head.data(), head.size()));

  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (t.produce) {
      auto data = t.produce();
      if (!data.ok()) return data.status().WithContext(fmt::format("tensor '{}'", t.name));
      if (data->size() != t.nbytes)
        return Internal("tensor '{}': producer gave {} bytes, expected {}", t.name, data->size(),
                        t.nbytes);
      FLASHKV_RETURN_IF_ERROR(append(data->data(), data->size()));
    } else {
      FLASHKV_RETURN_IF_ERROR(append(t.data.data(), t.data.size()));
    }
    uint64_t pad = AlignUp(t.nbytes, align) - t.nbytes;
    for (; pad > sizeof(kZeros); pad -= sizeof(kZeros))
      FLASHKV_RETURN_IF_ERROR(append(kZeros, sizeof(kZeros)));
    FLASHKV_RETURN_IF_ERROR(append(kZeros, pad));
    if (progress) progress(i + 1, tensors_.size(), t.name);
  }
  return Status::Ok();
}

Expected<std::vector<uint8_t>> GgufWriter::WriteToBytes() const {
  std::vector<uint8_t> bytes;
  FLASHKV_RETURN_IF_ERROR(WriteTo(
      [&](const uint8_t* p, size_t n) {
        bytes.insert(bytes.end(), p, p + n);
        return Status::Ok();
      },
      {}));
  return bytes;
}

Status GgufWriter::Write(const std::string& path) const {
  return Write(path, {});
}

Status GgufWriter::WriteFile(const std::string& path, const ProgressFn& progress) const {
  FLASHKV_ASSIGN_OR_RETURN(File file, File::Create(path));
  // File::Create makes private (0600) files for the KV cache; a model file is shared like
  // any other output: 0644 less the umask.
  if (::fchmod(file.fd(), 0644 & ~CurrentUmask()) != 0) {
    return IoError("chmod {}: {}", path, std::strerror(errno));
  }
  FileSink sink(file);
  FLASHKV_RETURN_IF_ERROR(
      WriteTo([&](const uint8_t* p, size_t n) { return sink.Append(p, n); }, progress));
  FLASHKV_RETURN_IF_ERROR(sink.Flush());
  FLASHKV_RETURN_IF_ERROR(file.Sync());
  return file.Close();
}

Status GgufWriter::Write(const std::string& path, const ProgressFn& progress) const {
  const std::string tmp = path + ".tmp";
  Status s = WriteFile(tmp, progress);
  if (s.ok()) s = RenameDurably(tmp, path);
  if (!s.ok()) (void)RemoveFile(tmp);
  return s;
}

}  // namespace flashkv
