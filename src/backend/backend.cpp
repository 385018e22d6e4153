#include "backend/backend.h"

#include <vector>

namespace flashkv {

void DeviceBuffer::Release() {
  if (owner_ != nullptr && data_ != nullptr) owner_->FreeBuffer(data_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

Status Backend::SetFloatPath(FloatPath path) {
  if (path == FloatPath::kExact) return Status::Ok();
  return Unsupported(
      "--numerics fast needs tensor-core kernels, which the {} backend does not have; it "
      "computes the exact numerics (--numerics official) only",
      name());
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

Expected<DevPtr<const uint8_t>> Backend::MapHost(const void* p, size_t) {
  // A backend whose memory is the host's reads the range where it is.
  return DevPtr<const uint8_t>(static_cast<const uint8_t*>(p));
}

void Backend::UnmapHost(const void*) {}

Expected<uint64_t> Backend::MarkOps() {
  return uint64_t(1);
}

Expected<uint64_t> Backend::UploadAfter(uint64_t, const HostCopy* copies, size_t n) {
  FLASHKV_RETURN_IF_ERROR(WriteMany(copies, n));
  return uint64_t(1);
}

Status Backend::WaitUpload(uint64_t) {
  return Status::Ok();
}

bool Backend::GatherExperts(const ExpertGather&, DevPtr<const int32_t>, int) {
  return false;
}

void Backend::CountRoutes(DevPtr<const int32_t> selected, int n, int n_expert,
                          DevPtr<uint32_t> counts) {
  if (n <= 0 || n_expert <= 0) return;
  std::vector<int32_t> ids(size_t(n), -1);
  std::vector<uint32_t> c(size_t(n_expert), 0);
  // A failed read or write leaves the counts as they were: they steer the cache, never the
  // logits, and the backend's own error reaches the caller at its next Synchronize.
  if (!Read(selected, ids.data(), ids.size() * sizeof(int32_t)).ok()) return;
  if (!Read(counts, c.data(), c.size() * sizeof(uint32_t)).ok()) return;
  for (int32_t e : ids) {
    if (e >= 0 && e < n_expert) ++c[size_t(e)];
  }
  (void)Write(counts, c.data(), c.size() * sizeof(uint32_t));
}

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
