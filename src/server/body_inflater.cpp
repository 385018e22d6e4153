#include "server/body_inflater.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>

namespace flashkv {

struct BodyInflater::Stream {
  z_stream z{};
  bool ready = false;
  bool ended = true;  // no member started yet: an empty body is a complete one
  bool seen = false;
};

BodyInflater::BodyInflater() : s_(std::make_unique<Stream>()) {
  // 15 + 32: a zlib or a gzip header, detected per member.
  s_->ready = inflateInit2(&s_->z, 15 + 32) == Z_OK;
}

BodyInflater::~BodyInflater() {
  if (s_->ready) inflateEnd(&s_->z);
}

Status BodyInflater::Feed(std::string_view in, std::string* out, size_t limit) {
  if (!s_->ready) return ResourceExhausted("cannot start a decompressor");
  z_stream& z = s_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  char buf[16384];
  // Until the input is used up and the last inflate left room (no output pending).
  for (bool more = z.avail_in > 0; more;) {
    if (s_->ended) {
      if (z.avail_in == 0) break;
      // A new member starts (the first, or one after another ended).
      if (s_->seen && inflateReset(&z) != Z_OK) return InvalidArgument("decompressor reset");
      s_->ended = false;
      s_->seen = true;
    }
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    const int r = inflate(&z, Z_NO_FLUSH);
    if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR) {
      return InvalidArgument("the body is not valid gzip/deflate data");
    }
    const size_t n = sizeof buf - z.avail_out;
    if (n > limit - std::min(limit, out->size())) {
      return ResourceExhausted("the decoded body passes the limit");
    }
    out->append(buf, n);
    if (r == Z_STREAM_END) s_->ended = true;
    if (r == Z_BUF_ERROR && n == 0) break;  // needs more input
    more = z.avail_in > 0 || z.avail_out == 0;
  }
  return Status::Ok();
}

Status BodyInflater::Finish() const {
  if (!s_->ended) return InvalidArgument("the compressed body is truncated");
  return Status::Ok();
}

bool InflatableCoding(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  auto same = [&](std::string_view name) {
    if (v.size() != name.size()) return false;
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(v[i])) != name[i]) return false;
    }
    return true;
  };
  return same("gzip") || same("x-gzip") || same("deflate");
}

}  // namespace flashkv
