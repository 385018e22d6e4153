#include "gguf/gguf_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "gguf/byte_cursor.h"

namespace flashkv {
namespace {

// Arrays of arrays are legal GGUF, but no writer nests deeper than two; anything deeper is
// treated as damage rather than recursed into.
constexpr int kMaxArrayDepth = 3;
// Sizes below which a record cannot possibly fit: used to reject absurd counts before
// looping over them. A KV is at least key length (8) + type (4) + a 1-byte value; a tensor
// info is at least name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// general.alignment beyond this is certainly damage (and would overflow align-up math).
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;

// Smallest encoding of one array element of `type`.
uint64_t MinElemBytes(GgufType type) {
  if (type == GgufType::kString) return 8;
  if (type == GgufType::kArray) return 4 + 8;
  return GgufScalarSize(type);
}

// Advances over one value of `type`, validating lengths, nested types and counts.
Status SkipValue(ByteCursor& c, GgufType type, int depth, std::string_view what);

Status SkipArrayBody(ByteCursor& c, int depth, std::string_view what, GgufType* elem_type_out,
                     uint64_t* count_out) {
  uint64_t at = c.pos();
  if (depth >= kMaxArrayDepth)
    return Corrupt("{} at offset {}: arrays nested deeper than {} levels", what, at,
                   kMaxArrayDepth);
  FLASHKV_ASSIGN_OR_RETURN(uint32_t elem_id, c.U32(fmt::format("{} array type", what)));
  if (!IsValidGgufType(elem_id))
    return Corrupt("{} at offset {}: unknown array element type {}", what, at, elem_id);
  GgufType elem = static_cast<GgufType>(elem_id);
  FLASHKV_ASSIGN_OR_RETURN(uint64_t count, c.U64(fmt::format("{} array length", what)));
  uint64_t min = MinElemBytes(elem);
  if (count > c.remaining() / min)
    return Corrupt("{} at offset {}: array of {} {} elements cannot fit in the {} bytes left", what,
                   at, count, GgufTypeName(elem), c.remaining());
  if (elem_type_out) *elem_type_out = elem;
  if (count_out) *count_out = count;
  if (elem != GgufType::kString && elem != GgufType::kArray) return c.Skip(count * min, what);
  for (uint64_t i = 0; i < count; ++i) FLASHKV_RETURN_IF_ERROR(SkipValue(c, elem, depth + 1, what));
  return Status::Ok();
}

Status SkipValue(ByteCursor& c, GgufType type, int depth, std::string_view what) {
  if (type == GgufType::kString) return c.String(what).status();
  if (type == GgufType::kArray) return SkipArrayBody(c, depth, what, nullptr, nullptr);
  return c.Skip(GgufScalarSize(type), what);
}

// An integer decoded from any GGUF integer type without loss.
struct IntValue {
  bool is_signed;
  int64_t s;
  uint64_t u;
};

template <typename T>
T LoadAt(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Requires IsGgufInteger(type) and that p holds a validated value.
IntValue DecodeInt(GgufType type, const uint8_t* p) {
  switch (type) {
    case GgufType::kU8:
      return {false, 0, LoadAt<uint8_t>(p)};
    case GgufType::kU16:
      return {false, 0, LoadAt<uint16_t>(p)};
    case GgufType::kU32:
      return {false, 0, LoadAt<uint32_t>(p)};
    case GgufType::kU64:
      return {false, 0, LoadAt<uint64_t>(p)};
    case GgufType::kI8:
      return {true, LoadAt<int8_t>(p), 0};
    case GgufType::kI16:
      return {true, LoadAt<int16_t>(p), 0};
    case GgufType::kI32:
      return {true, LoadAt<int32_t>(p), 0};
    case GgufType::kI64:
      return {true, LoadAt<int64_t>(p), 0};
    default:
      return {false, 0, 0};
  }
}

Expected<int64_t> IntToI64(const IntValue& v, std::string_view key) {
  if (v.is_signed) return v.s;
  if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return OutOfRange("metadata key '{}': value {} does not fit in int64", key, v.u);
  return static_cast<int64_t>(v.u);
}

double IntToDouble(const IntValue& v) {
  return v.is_signed ? static_cast<double>(v.s) : static_cast<double>(v.u);
}

// Requires IsGgufFloat(type).
double DecodeFloat(GgufType type, const uint8_t* p) {
  return type == GgufType::kF32 ? static_cast<double>(LoadAt<float>(p)) : LoadAt<double>(p);
}

// Reads a validated GGUF string at absolute offset pos; returns the view and advances pos.
std::string_view StringAt(const uint8_t* base, uint64_t* pos) {
  uint64_t n = LoadAt<uint64_t>(base + *pos);
  std::string_view s(reinterpret_cast<const char*>(base + *pos + 8), static_cast<size_t>(n));
  *pos += 8 + n;
  return s;
}

std::string Quote(std::string_view s, size_t max_chars = 64) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      out += fmt::format("\\x{:02x}", ch);
    } else {
      out += static_cast<char>(ch);
    }
  }
  if (s.size() > max_chars) out += "...";
  return out + "\"";
}

}  // namespace

Expected<GgufFile> GgufFile::Open(const std::string& path) {
  auto map = MappedFile::Open(path);
  if (!map.ok()) return map.status();
  GgufFile f;
  f.map_ = std::move(map).value();
  f.base_ = f.map_.data();
  f.size_ = f.map_.size();
  f.path_ = path;
  Status s = f.ParseAll();
  if (!s.ok()) return s.WithContext(path);
  return f;
}

Expected<GgufFile> GgufFile::FromBytes(std::vector<uint8_t> bytes) {
  GgufFile f;
  f.owned_ = std::move(bytes);
  f.base_ = f.owned_.data();
  f.size_ = f.owned_.size();
  FLASHKV_RETURN_IF_ERROR(f.ParseAll());
  return f;
}

Status GgufFile::ParseAll() {
  ByteCursor c(base_, size_);
  FLASHKV_ASSIGN_OR_RETURN(uint32_t magic, c.U32("magic"));
  if (magic != kGgufMagic)
    return Corrupt("not a GGUF file: magic is {:#010x}, expected {:#010x} (\"GGUF\")", magic,
                   kGgufMagic);
  FLASHKV_ASSIGN_OR_RETURN(version_, c.U32("version"));
  if (version_ != kGgufVersion)
    return Unsupported("GGUF version {} is not supported (flashkv reads version {} only)", version_,
                       kGgufVersion);
  FLASHKV_ASSIGN_OR_RETURN(uint64_t n_tensors, c.U64("tensor count"));
  FLASHKV_ASSIGN_OR_RETURN(uint64_t n_kv, c.U64("metadata count"));
  // Reject absurd counts before reserving or looping: each record has a minimum size.
  if (n_kv > c.remaining() / kMinKvBytes || n_tensors > c.remaining() / kMinTensorInfoBytes ||
      n_kv * kMinKvBytes + n_tensors * kMinTensorInfoBytes > c.remaining())
    return Corrupt(
        "header claims {} metadata entries and {} tensors, which cannot fit in a "
        "{}-byte file",
        n_kv, n_tensors, size_);

  kvs_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    uint64_t at = c.pos();
    FLASHKV_ASSIGN_OR_RETURN(std::string_view key,
                             c.String(fmt::format("metadata entry {} key", i)));
    if (key.empty()) return Corrupt("metadata entry {} at offset {} has an empty key", i, at);
    std::string what = fmt::format("metadata key '{}'", key);
    FLASHKV_ASSIGN_OR_RETURN(uint32_t type_id, c.U32(what + " type"));
    if (!IsValidGgufType(type_id))
      return Corrupt("{} at offset {}: unknown value type {}", what, at, type_id);
    Kv kv{std::string(key), static_cast<GgufType>(type_id), GgufType::kU8, 0, 0};
    if (kv.type == GgufType::kArray) {
      // The first element sits after the u32 element type and the u64 count.
      kv.value_pos = c.pos() + 4 + 8;
      FLASHKV_RETURN_IF_ERROR(SkipArrayBody(c, 0, what, &kv.elem_type, &kv.count));
    } else {
      kv.value_pos = c.pos();
      FLASHKV_RETURN_IF_ERROR(SkipValue(c, kv.type, 0, what));
    }
    if (kv_index_.count(kv.key))
      return Corrupt("duplicate metadata key '{}' at offset {}", kv.key, at);
    kv_index_.emplace(kv.key, kvs_.size());
    kvs_.push_back(std::move(kv));
  }

  if (Has(kGgufAlignmentKey)) {
    auto a = GetU64(kGgufAlignmentKey);
    if (!a.ok()) return a.status();
    if (*a == 0 || (*a & (*a - 1)) != 0)
      return Corrupt("general.alignment {} is not a power of two", *a);
    if (*a > kMaxAlignment) return Corrupt("general.alignment {} is absurdly large", *a);
    alignment_ = *a;
  }

  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    return Corrupt(
        "header claims {} tensors, but only {} bytes remain for their infos at "
        "offset {}",
        n_tensors, c.remaining(), c.pos());
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    uint64_t at = c.pos();
    FLASHKV_ASSIGN_OR_RETURN(std::string_view name,
                             c.String(fmt::format("tensor info {} name", i)));
    if (name.empty()) return Corrupt("tensor info {} at offset {} has an empty name", i, at);
    std::string what = fmt::format("tensor '{}'", name);
    FLASHKV_ASSIGN_OR_RETURN(uint32_t n_dims, c.U32(what + " n_dims"));
    if (n_dims == 0 || n_dims > kGgufMaxDims)
      return Corrupt("{} at offset {}: n_dims {} is outside 1..{}", what, at, n_dims, kGgufMaxDims);
    GgufTensorInfo t;
    t.name = std::string(name);
    t.ne.resize(n_dims);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      FLASHKV_ASSIGN_OR_RETURN(t.ne[d], c.U64(what + " ne"));
      if (t.ne[d] == 0) return Corrupt("{}: dimension {} is 0", what, d);
      if (t.ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / elems)
        return Corrupt("{}: element count overflows (ne[{}] = {})", what, d, t.ne[d]);
      elems *= t.ne[d];
    }
    FLASHKV_ASSIGN_OR_RETURN(uint32_t type_id, c.U32(what + " type"));
    const DTypeInfo* info = FindDTypeInfo(type_id);
    if (!info) return Corrupt("{}: unknown tensor type id {}", what, type_id);
    t.type = info->type;
    FLASHKV_ASSIGN_OR_RETURN(t.offset, c.U64(what + " offset"));
    auto nbytes = TensorBytes(t.type, t.ne.data(), static_cast<int>(n_dims));
    if (!nbytes.ok()) return Corrupt("{}: {}", what, nbytes.status().message());
    t.nbytes = *nbytes;
    if (t.offset % alignment_ != 0)
      return Corrupt("{}: data offset {} is not a multiple of the alignment {}", what, t.offset,
                     alignment_);
    if (tensor_index_.count(t.name))
      return Corrupt("duplicate tensor name '{}' at offset {}", t.name, at);
    tensor_index_.emplace(t.name, tensors_.size());
    t.data = nullptr;
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  uint64_t pos = c.pos();
  data_offset_ = (pos + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty() && data_offset_ > size_)
    return Corrupt("data section would start at offset {}, past the end of the file (size {})",
                   data_offset_, size_);
  uint64_t data_size = tensors_.empty() ? 0 : size_ - data_offset_;

  // Bounds and overlap: sort by offset and require each tensor to end before the next.
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  const GgufTensorInfo* prev = nullptr;
  for (size_t idx : order) {
    GgufTensorInfo& t = tensors_[idx];
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      return Corrupt("tensor '{}': data [{}, {}) past end of file (size {})", t.name,
                     data_offset_ + t.offset, data_offset_ + t.offset + t.nbytes, size_);
    if (prev && t.offset < prev->offset + prev->nbytes)
      return Corrupt("tensor '{}': data at offset {} overlaps tensor '{}' ([{}, {}))", t.name,
                     t.offset, prev->name, prev->offset, prev->offset + prev->nbytes);
    t.data = base_ + data_offset_ + t.offset;
    prev = &t;
  }
  return Status::Ok();
}

bool GgufFile::Has(std::string_view key) const {
  return kv_index_.find(key) != kv_index_.end();
}

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(kvs_.size());
  for (const Kv& kv : kvs_) out.push_back(kv.key);
  return out;
}

Expected<const GgufFile::Kv*> GgufFile::FindKv(std::string_view key) const {
  auto it = kv_index_.find(key);
  if (it == kv_index_.end()) return NotFound("metadata key '{}' not found", key);
  return &kvs_[it->second];
}

Expected<GgufType> GgufFile::TypeOf(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(const Kv* kv, FindKv(key));
  return kv->type;
}

Expected<GgufArrayInfo> GgufFile::ArrayInfo(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(const Kv* kv, FindKv(key));
  if (kv->type != GgufType::kArray)
    return InvalidArgument("metadata key '{}' is {}, expected an array", key,
                           GgufTypeName(kv->type));
  return GgufArrayInfo{kv->elem_type, kv->count};
}

Expected<uint64_t> GgufFile::GetU64(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(const Kv* kv, FindKv(key));
  if (!IsGgufInteger(kv->type))
    return InvalidArgument("metadata key '{}' is {}, expected an integer", key,
                           GgufTypeName(kv->type));
  IntValue v = DecodeInt(kv->type, base_ + kv->value_pos);
  if (v.is_signed) {
    if (v.s < 0) return OutOfRange("metadata key '{}': value {} is negative", key, v.s);
    return static_cast<uint64_t>(v.s);
  }
  return v.u;
}

Expected<int64_t> GgufFile::GetI64(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(const Kv* kv, FindKv(key));
  if (!IsGgufInteger(kv->type))
    return InvalidArgument("metadata key '{}' is {}, expected an integer", key,
                           GgufTypeName(kv->type));
  return IntToI64(DecodeInt(kv->type, base_ + kv->value_pos), key);
}

Expected<double> GgufFile::GetF64(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(const Kv* kv, FindKv(key));
  if (IsGgufFloat(kv->type)) return DecodeFloat(kv->type, base_ + kv->value_pos);
  if (IsGgufInteger(kv->type)) return IntToDouble(DecodeInt(kv->type, base_ + kv->value_pos));
  return InvalidArgument("metadata key '{}' is {}, expected a number", key, GgufTypeName(kv->type));
}

Expected<bool> GgufFile::GetBool(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(const Kv* kv, FindKv(key));
  if (kv->type != GgufType::kBool)
    return InvalidArgument("metadata key '{}' is {}, expected bool", key, GgufTypeName(kv->type));
  return base_[kv->value_pos] != 0;
}

Expected<std::string> GgufFile::GetString(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(const Kv* kv, FindKv(key));
  if (kv->type != GgufType::kString)
    return InvalidArgument("metadata key '{}' is {}, expected string", key, GgufTypeName(kv->type));
  uint64_t pos = kv->value_pos;
  return std::string(StringAt(base_, &pos));
}

Expected<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(GgufArrayInfo a, ArrayInfo(key));
  if (!IsGgufInteger(a.elem_type))
    return InvalidArgument("metadata key '{}' is an array of {}, expected integers", key,
                           GgufTypeName(a.elem_type));
  const Kv* kv = &kvs_[kv_index_.find(key)->second];
  uint64_t size = GgufScalarSize(a.elem_type);
  std::vector<int64_t> out(a.count);
  for (uint64_t i = 0; i < a.count; ++i) {
    auto v = IntToI64(DecodeInt(a.elem_type, base_ + kv->value_pos + i * size), key);
    if (!v.ok()) return v.status();
    out[i] = *v;
  }
  return out;
}

Expected<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(GgufArrayInfo a, ArrayInfo(key));
  if (!IsGgufInteger(a.elem_type) && !IsGgufFloat(a.elem_type))
    return InvalidArgument("metadata key '{}' is an array of {}, expected numbers", key,
                           GgufTypeName(a.elem_type));
  const Kv* kv = &kvs_[kv_index_.find(key)->second];
  uint64_t size = GgufScalarSize(a.elem_type);
  std::vector<double> out(a.count);
  for (uint64_t i = 0; i < a.count; ++i) {
    const uint8_t* p = base_ + kv->value_pos + i * size;
    out[i] = IsGgufFloat(a.elem_type) ? DecodeFloat(a.elem_type, p)
                                      : IntToDouble(DecodeInt(a.elem_type, p));
  }
  return out;
}

Expected<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  FLASHKV_ASSIGN_OR_RETURN(GgufArrayInfo a, ArrayInfo(key));
  if (a.elem_type != GgufType::kString)
    return InvalidArgument("metadata key '{}' is an array of {}, expected strings", key,
                           GgufTypeName(a.elem_type));
  const Kv* kv = &kvs_[kv_index_.find(key)->second];
  std::vector<std::string> out;
  out.reserve(a.count);
  uint64_t pos = kv->value_pos;
  for (uint64_t i = 0; i < a.count; ++i) out.emplace_back(StringAt(base_, &pos));
  return out;
}

std::string GgufFile::Describe(std::string_view key, size_t max_elems) const {
  auto kv_or = FindKv(key);
  if (!kv_or.ok()) return "(absent)";
  const Kv* kv = *kv_or;
  auto scalar = [&](GgufType t, uint64_t* pos) -> std::string {
    const uint8_t* p = base_ + *pos;
    if (t == GgufType::kString) return Quote(StringAt(base_, pos));
    *pos += GgufScalarSize(t);
    if (t == GgufType::kBool) return *p ? "true" : "false";
    if (IsGgufFloat(t)) return fmt::format("{}", DecodeFloat(t, p));
    IntValue v = DecodeInt(t, p);
    return v.is_signed ? fmt::format("{}", v.s) : fmt::format("{}", v.u);
  };
  uint64_t pos = kv->value_pos;
  if (kv->type != GgufType::kArray)
    return fmt::format("{} {}", GgufTypeName(kv->type), scalar(kv->type, &pos));
  std::string out = fmt::format("array<{}>[{}]", GgufTypeName(kv->elem_type), kv->count);
  if (kv->elem_type == GgufType::kArray) return out;  // nested arrays: shape only
  out += " [";
  for (uint64_t i = 0; i < kv->count && i < max_elems; ++i) {
    if (i) out += ", ";
    out += scalar(kv->elem_type, &pos);
  }
  if (kv->count > max_elems) out += ", ...";
  return out + "]";
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace flashkv
