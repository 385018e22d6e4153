#include "tensor/dtype.h"

#include <array>
#include <cctype>
#include <limits>

namespace flashkv {
namespace {

// GGML's type table (ggml.c type_traits), for every id a GGUF file may carry.
constexpr std::array<DTypeInfo, 32> kTypes = {{
    {DType::kF32, "f32", 1, 4, true},
    {DType::kF16, "f16", 1, 2, true},
    {DType::kQ4_0, "q4_0", 32, 18, false},
    {DType::kQ4_1, "q4_1", 32, 20, false},
    {DType::kQ5_0, "q5_0", 32, 22, false},
    {DType::kQ5_1, "q5_1", 32, 24, false},
    {DType::kQ8_0, "q8_0", 32, 34, true},
    {DType::kQ8_1, "q8_1", 32, 36, false},
    {DType::kQ2_K, "q2_K", 256, 84, true},
    {DType::kQ3_K, "q3_K", 256, 110, true},
    {DType::kQ4_K, "q4_K", 256, 144, true},
    {DType::kQ5_K, "q5_K", 256, 176, true},
    {DType::kQ6_K, "q6_K", 256, 210, true},
    {DType::kQ8_K, "q8_K", 256, 292, true},
    {DType::kIQ2_XXS, "iq2_xxs", 256, 66, true},
    {DType::kIQ2_XS, "iq2_xs", 256, 74, true},
    {DType::kIQ3_XXS, "iq3_xxs", 256, 98, true},
    {DType::kIQ1_S, "iq1_s", 256, 50, true},
    {DType::kIQ4_NL, "iq4_nl", 32, 18, true},
    {DType::kIQ3_S, "iq3_s", 256, 110, true},
    {DType::kIQ2_S, "iq2_s", 256, 82, true},
    {DType::kIQ4_XS, "iq4_xs", 256, 136, true},
    {DType::kI8, "i8", 1, 1, false},
    {DType::kI16, "i16", 1, 2, false},
    {DType::kI32, "i32", 1, 4, false},
    {DType::kI64, "i64", 1, 8, false},
    {DType::kF64, "f64", 1, 8, false},
    {DType::kIQ1_M, "iq1_m", 256, 56, true},
    {DType::kBF16, "bf16", 1, 2, true},
    {DType::kTQ1_0, "tq1_0", 256, 54, false},
    {DType::kTQ2_0, "tq2_0", 256, 66, false},
    {DType::kMXFP4, "mxfp4", 32, 17, true},
}};

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

const DTypeInfo* FindDTypeInfo(uint32_t ggml_id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == ggml_id) return &t;
  return nullptr;
}

const DTypeInfo& GetDTypeInfo(DType type) {
  const DTypeInfo* info = FindDTypeInfo(static_cast<uint32_t>(type));
  return info ? *info : kTypes[0];
}

const DTypeInfo* FindDTypeInfoByName(std::string_view name) {
  for (const auto& t : kTypes)
    if (EqualsNoCase(t.name, name)) return &t;
  return nullptr;
}

Expected<uint64_t> RowBytes(DType type, uint64_t n) {
  const DTypeInfo* info = FindDTypeInfo(static_cast<uint32_t>(type));
  if (!info) return InvalidArgument("unknown tensor type id {}", static_cast<uint32_t>(type));
  if (n % info->block_size != 0)
    return InvalidArgument("row of {} values is not a whole number of {} blocks ({} values each)",
                           n, info->name, info->block_size);
  uint64_t blocks = n / info->block_size;
  if (blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes)
    return OutOfRange("row of {} {} values overflows 64 bits", n, info->name);
  return blocks * info->block_bytes;
}

Expected<uint64_t> TensorBytes(DType type, const uint64_t* ne, int n_dims) {
  if (n_dims < 1) return InvalidArgument("tensor has no dimensions");
  FLASHKV_ASSIGN_OR_RETURN(uint64_t bytes, RowBytes(type, ne[0]));
  for (int i = 1; i < n_dims; ++i) {
    if (ne[i] != 0 && bytes > std::numeric_limits<uint64_t>::max() / ne[i])
      return OutOfRange("tensor size overflows 64 bits");
    bytes *= ne[i];
  }
  return bytes;
}

}  // namespace flashkv
