#include "backend/backend.h"

namespace flashkv {

void DeviceBuffer::Release() {
  if (owner_ != nullptr && data_ != nullptr) owner_->FreeBuffer(data_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace flashkv
