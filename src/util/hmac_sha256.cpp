#include "util/hmac_sha256.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <memory>

namespace flashkv {
namespace {

struct MacFree {
  void operator()(EVP_MAC* m) const { EVP_MAC_free(m); }
};
struct CtxFree {
  void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
};

}  // namespace

HmacSha256Digest HmacSha256(std::string_view key, std::initializer_list<std::string_view> parts) {
  HmacSha256Digest out{};
  std::unique_ptr<EVP_MAC, MacFree> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (!mac) return out;  // an all-zero digest never matches a real one
  std::unique_ptr<EVP_MAC_CTX, CtxFree> ctx(EVP_MAC_CTX_new(mac.get()));
  if (!ctx) return out;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_END};
  // HMAC takes an empty key, but EVP_MAC_init wants a non-null pointer for it.
  static const unsigned char kEmpty = 0;
  const auto* k = key.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(key.data());
  if (EVP_MAC_init(ctx.get(), k, key.size(), params) != 1) return out;
  for (std::string_view p : parts) {
    if (EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(p.data()), p.size()) !=
        1) {
      return HmacSha256Digest{};
    }
  }
  size_t len = 0;
  if (EVP_MAC_final(ctx.get(), out.data(), &len, out.size()) != 1 || len != out.size()) {
    return HmacSha256Digest{};
  }
  return out;
}

bool DigestsEqual(const HmacSha256Digest& a, std::string_view b) {
  return b.size() == a.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace flashkv
