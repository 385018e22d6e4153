#include "convert/safetensors_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "tensor/half.h"

namespace flashkv {
namespace {

// The safetensors format caps the header at 100 MB; more is damage.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeEntry {
  std::string_view name;
  StDType type;
  uint64_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {"F32", StDType::kF32, 4},         {"F16", StDType::kF16, 2}, {"BF16", StDType::kBF16, 2},
    {"I64", StDType::kI64, 8},         {"I32", StDType::kI32, 4}, {"F8_E4M3", StDType::kF8_E4M3, 1},
    {"F8_E8M0", StDType::kF8_E8M0, 1}, {"I8", StDType::kI8, 1},   {"U8", StDType::kU8, 1},
};

const DTypeEntry* FindDType(std::string_view name) {
  for (const auto& e : kDTypes)
    if (e.name == name) return &e;
  return nullptr;
}

// OCP FP8 E4M3 ("fn"): bias 7, no infinities, S.1111.111 is NaN.
float F8E4M3ToF32(uint8_t v) {
  const bool neg = v & 0x80;
  const int exp = (v >> 3) & 0xF;
  const int mant = v & 0x7;
  float r;
  if (exp == 15 && mant == 7) {
    r = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    r = std::ldexp(static_cast<float>(mant), -9);  // mant/8 * 2^-6
  } else {
    r = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  }
  return neg ? -r : r;
}

// E8M0: an unsigned power-of-two exponent, bias 127; 0xFF is NaN.
float F8E8M0ToF32(uint8_t v) {
  if (v == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

template <typename T>
T LoadAt(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

std::string_view StDTypeName(StDType t) {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.name;
  return "?";
}

uint64_t StDTypeSize(StDType t) {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.size;
  return 0;
}

uint64_t SafetensorsTensor::numel() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // validated against overflow at parse time
  return n;
}

Expected<std::vector<float>> SafetensorsTensor::ToF32() const {
  const uint64_t n = numel();
  std::vector<float> out(n);
  switch (dtype) {
    case StDType::kF32:
      if (n) std::memcpy(out.data(), data, n * 4);
      break;
    case StDType::kF16:
      for (uint64_t i = 0; i < n; ++i) out[i] = F16ToF32(LoadAt<uint16_t>(data + 2 * i));
      break;
    case StDType::kBF16:
      for (uint64_t i = 0; i < n; ++i) out[i] = BF16ToF32(LoadAt<uint16_t>(data + 2 * i));
      break;
    case StDType::kF8_E4M3:
      for (uint64_t i = 0; i < n; ++i) out[i] = F8E4M3ToF32(data[i]);
      break;
    case StDType::kF8_E8M0:
      for (uint64_t i = 0; i < n; ++i) out[i] = F8E8M0ToF32(data[i]);
      break;
    case StDType::kI64:
    case StDType::kI32:
      return InvalidArgument("tensor '{}' is {}, not a floating-point tensor", name,
                             StDTypeName(dtype));
    case StDType::kI8:
    case StDType::kU8:
      return InvalidArgument(
          "tensor '{}' is {}: packed bytes (FP4 weights decode with their scale)", name,
          StDTypeName(dtype));
  }
  return out;
}

Expected<std::vector<int64_t>> SafetensorsTensor::ToI64() const {
  const uint64_t n = numel();
  std::vector<int64_t> out(n);
  if (dtype == StDType::kI64) {
    if (n) std::memcpy(out.data(), data, n * 8);
  } else if (dtype == StDType::kI32) {
    for (uint64_t i = 0; i < n; ++i) out[i] = LoadAt<int32_t>(data + 4 * i);
  } else {
    return InvalidArgument("tensor '{}' is {}, not an integer tensor", name, StDTypeName(dtype));
  }
  return out;
}

Expected<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  auto map = MappedFile::Open(path);
  if (!map.ok()) return map.status();
  SafetensorsFile f;
  f.map_ = std::move(map).value();
  f.base_ = f.map_.data();
  f.size_ = f.map_.size();
  f.path_ = path;
  Status s = f.Parse();
  if (!s.ok()) return s.WithContext(path);
  return f;
}

Expected<SafetensorsFile> SafetensorsFile::FromBytes(std::vector<uint8_t> bytes) {
  SafetensorsFile f;
  f.owned_ = std::move(bytes);
  f.base_ = f.owned_.data();
  f.size_ = f.owned_.size();
  FLASHKV_RETURN_IF_ERROR(f.Parse());
  return f;
}

Status SafetensorsFile::Parse() {
  // nlohmann reports type misuse by throwing; the checks below avoid every such case, and
  // this guard keeps a missed one from crossing the module boundary.
  try {
    return ParseHeader();
  } catch (const std::exception& e) {
    return Corrupt("malformed safetensors header: {}", e.what());
  }
}

Status SafetensorsFile::ParseHeader() {
  using nlohmann::json;
  if (size_ < 8)
    return Corrupt("truncated: {} bytes, too short for the 8-byte safetensors header length",
                   size_);
  const uint64_t header_len = LoadAt<uint64_t>(base_);
  if (header_len > size_ - 8)
    return Corrupt("header length {} runs past the end of the file (size {})", header_len, size_);
  if (header_len > kMaxHeaderBytes)
    return Corrupt("header length {} is over the 100 MB safetensors limit", header_len);
  const char* text = reinterpret_cast<const char*>(base_ + 8);
  json header = json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return Corrupt("the {}-byte JSON header does not parse", header_len);
  if (!header.is_object()) return Corrupt("the JSON header is not an object");

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size_ - data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) return Corrupt("__metadata__ is not an object");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string())
          return Corrupt("__metadata__ entry '{}' is not a string", m.key());
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!e.is_object()) return Corrupt("tensor '{}': header entry is not an object", name);
    auto dt = e.find("dtype");
    auto sh = e.find("shape");
    auto off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string())
      return Corrupt("tensor '{}': missing or non-string dtype", name);
    if (sh == e.end() || !sh->is_array())
      return Corrupt("tensor '{}': missing or non-array shape", name);
    if (off == e.end() || !off->is_array() || off->size() != 2)
      return Corrupt("tensor '{}': data_offsets must be [begin, end]", name);
    const std::string dtype_name = dt->get<std::string>();
    const DTypeEntry* dtype = FindDType(dtype_name);
    if (!dtype)
      return Unsupported(
          "tensor '{}': dtype {} is not supported (flashkv converts F32, F16, BF16, I64, I32, "
          "I8, U8, F8_E4M3, F8_E8M0)",
          name, dtype_name);
    SafetensorsTensor t;
    t.name = name;
    t.dtype = dtype->type;
    uint64_t numel = 1;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned())
        return Corrupt("tensor '{}': shape entries must be non-negative integers", name);
      uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / dtype->size / v)
        return Corrupt("tensor '{}': shape overflows 64 bits", name);
      numel *= v;
      t.shape.push_back(v);
    }
    const json& b = (*off)[0];
    const json& en = (*off)[1];
    if (!b.is_number_unsigned() || !en.is_number_unsigned())
      return Corrupt("tensor '{}': data_offsets must be non-negative integers", name);
    const uint64_t begin = b.get<uint64_t>();
    const uint64_t end = en.get<uint64_t>();
    if (begin > end)
      return Corrupt("tensor '{}': data_offsets [{}, {}) run backwards", name, begin, end);
    if (end > data_size)
      return Corrupt("tensor '{}': data [{}, {}) past end of data section (size {})", name, begin,
                     end, data_size);
    t.nbytes = end - begin;
    if (t.nbytes != numel * dtype->size)
      return Corrupt("tensor '{}': {} data bytes, but {} x {} {} needs {}", name, t.nbytes,
                     fmt::join(t.shape, "x"), dtype->size, dtype_name, numel * dtype->size);
    t.data = base_ + data_start + begin;
    tensors_.push_back(std::move(t));
  }

  std::sort(tensors_.begin(), tensors_.end(),
            [](const auto& a, const auto& b) { return a.data < b.data; });
  for (size_t i = 1; i < tensors_.size(); ++i) {
    const auto& p = tensors_[i - 1];
    const auto& t = tensors_[i];
    if (t.data < p.data + p.nbytes)
      return Corrupt("tensor '{}': data at offset {} overlaps tensor '{}'", t.name,
                     t.data - base_ - data_start, p.name);
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return Status::Ok();
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const SafetensorsTensor& t, std::string_view n) { return t.name < n; });
  return (it != tensors_.end() && it->name == name) ? &*it : nullptr;
}

}  // namespace flashkv
