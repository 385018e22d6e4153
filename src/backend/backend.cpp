#include "backend/backend.h"

namespace flashkv {

void DeviceBuffer::Release() {
  if (owner_ != nullptr && data_ != nullptr) owner_->FreeBuffer(data_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

Status Backend::ReadMany(const HostCopy* copies, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    FLASHKV_RETURN_IF_ERROR(Read(copies[i].device, copies[i].host, copies[i].bytes));
  }
  return Status::Ok();
}

Status Backend::WriteMany(const HostCopy* copies, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    FLASHKV_RETURN_IF_ERROR(Write(copies[i].device, copies[i].host, copies[i].bytes));
  }
  return Status::Ok();
}

Expected<uint64_t> Backend::ReadManyAsync(const HostCopy* copies, size_t n) {
  FLASHKV_RETURN_IF_ERROR(ReadMany(copies, n));
  return uint64_t(1);  // already done
}

Status Backend::WaitCopies(uint64_t) {
  return Status::Ok();
}

Status Backend::PinHost(void*, size_t) {
  return Status::Ok();
}

void Backend::UnpinHost(void*) {}

std::optional<Backend::MemoryInfo> Backend::DeviceMemory() const {
  return std::nullopt;
}

Status Backend::CheckRandomWeight(const std::string& name, DType type,
                                  const std::array<uint64_t, 3>& ne) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ2_K:
    case DType::kQ4_K:
    case DType::kIQ2_XXS:
      break;
    default:
      return Unsupported("{}: random weights of type {} are not generated", name,
                         GetDTypeInfo(type).name);
  }
  if (ne[0] == 0 || ne[1] == 0 || ne[2] == 0) {
    return InvalidArgument("{}: empty shape [{}, {}, {}]", name, ne[0], ne[1], ne[2]);
  }
  if (ne[0] % GetDTypeInfo(type).block_size != 0) {
    return InvalidArgument("{}: {} rows of {} values are not whole blocks of {}", name,
                           GetDTypeInfo(type).name, ne[0], GetDTypeInfo(type).block_size);
  }
  return Status::Ok();
}

}  // namespace flashkv
