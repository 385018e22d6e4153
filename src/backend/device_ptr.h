// Handles to backend memory: DevPtr<T> (a typed address, non-owning) and DeviceBuffer
// (an owning allocation). The model and kv/ do host-side address arithmetic on these
// (row offsets are computable from positions) but never read or write through them;
// bytes cross between host and device only through Backend::Read/Write.
// Must not: know about models or ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace flashkv {

class Backend;

// A typed address in a backend's memory. Only backend implementations call get().
template <typename T>
class DevPtr {
 public:
  DevPtr() = default;
  explicit DevPtr(T* p) : p_(p) {}
  // DevPtr<float> converts to DevPtr<const float>.
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  DevPtr(DevPtr<U> other) : p_(other.get()) {}  // NOLINT: implicit like T* → const T*

  DevPtr operator+(size_t n) const { return DevPtr(p_ + n); }
  explicit operator bool() const { return p_ != nullptr; }
  // For backend implementations only: the raw device address.
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

// An allocation owned by a backend, freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* owner, void* data, size_t bytes)
      : owner_(owner), data_(data), bytes_(bytes) {}
  ~DeviceBuffer() { Release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : owner_(std::exchange(o.owner_, nullptr)),
        data_(std::exchange(o.data_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Release();
      owner_ = std::exchange(o.owner_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  size_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }
  template <typename T>
  DevPtr<T> as() const {
    return DevPtr<T>(static_cast<T*>(data_));
  }

 private:
  void Release();

  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace flashkv
