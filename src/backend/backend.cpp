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

}  // namespace flashkv
