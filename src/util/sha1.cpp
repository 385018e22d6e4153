#include "util/sha1.h"

#include <openssl/evp.h>

namespace flashkv {

struct Sha1::Ctx {
  EVP_MD_CTX* md = nullptr;
};

Sha1::Sha1() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx_->md, EVP_sha1(), nullptr);
}

Sha1::~Sha1() {
  EVP_MD_CTX_free(ctx_->md);
}

void Sha1::Update(const void* data, size_t n) {
  if (n > 0) EVP_DigestUpdate(ctx_->md, data, n);
}

Sha1Digest Sha1::Final() {
  Sha1Digest d{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md, d.data(), &len);
  EVP_DigestInit_ex(ctx_->md, EVP_sha1(), nullptr);
  return d;
}

Sha1Digest Sha1::Peek() const {
  Sha1Digest d{};
  unsigned int len = 0;
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(copy, ctx_->md);
  EVP_DigestFinal_ex(copy, d.data(), &len);
  EVP_MD_CTX_free(copy);
  return d;
}

Sha1Digest Sha1Of(std::string_view bytes) {
  Sha1 h;
  h.Update(bytes);
  return h.Final();
}

std::string Sha1Hex(const Sha1Digest& digest) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(40, '0');
  for (size_t i = 0; i < digest.size(); ++i) {
    s[2 * i] = kHex[digest[i] >> 4];
    s[2 * i + 1] = kHex[digest[i] & 15];
  }
  return s;
}

bool ParseSha1Hex(std::string_view hex, Sha1Digest* out) {
  if (hex.size() != 40) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Sha1Digest d{};
  for (size_t i = 0; i < 20; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    d[i] = uint8_t(hi << 4 | lo);
  }
  *out = d;
  return true;
}

}  // namespace flashkv
