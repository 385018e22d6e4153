// BodyInflater: a request body's gzip or deflate (zlib) coding undone as it streams in,
// bounded by the decoded size. cpp-httplib's own decoder matched the coding name case-
// sensitively ("GZIP" passed through undecoded) and stopped at the first gzip member, so
// a body of several members (RFC 1952 §2.2, what `cat a.gz b.gz` or a streaming
// compressor sends) was cut short; here every member is decoded, one after another.
// Must not: know HTTP (http_server.cpp feeds it) or JSON.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "util/status.h"

namespace flashkv {

class BodyInflater {
 public:
  BodyInflater();
  ~BodyInflater();
  BodyInflater(const BodyInflater&) = delete;
  BodyInflater& operator=(const BodyInflater&) = delete;

  // Appends what `in` decodes to to `out`; kResourceExhausted once `out` would pass
  // `limit`, kInvalidArgument for bytes that are not gzip / zlib.
  Status Feed(std::string_view in, std::string* out, size_t limit);
  // kInvalidArgument unless the last member ended (a truncated body).
  Status Finish() const;

 private:
  struct Stream;
  std::unique_ptr<Stream> s_;
};

// "gzip", "x-gzip" and "deflate" in any case, with surrounding spaces: a coding this
// decoder handles.
bool InflatableCoding(std::string_view content_encoding);

}  // namespace flashkv
