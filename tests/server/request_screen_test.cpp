// What the transport refuses from a request's head alone.
#include "server/request_screen.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

RequestHead Post(std::optional<std::string> content_length = "2") {
  RequestHead h;
  h.method = "POST";
  h.content_length = content_length;
  h.content_length_headers = content_length ? 1 : 0;
  h.content_type = "application/json";
  return h;
}

TEST(RequestScreenTest, FramingIsDecidedFromTheHead) {
  ScreenPolicy p;
  p.max_body_bytes = 100;
  EXPECT_FALSE(ScreenFraming(p, Post()).refused());
  EXPECT_FALSE(ScreenFraming(p, Post("100")).refused());
  EXPECT_EQ(ScreenFraming(p, Post("101")).status, 413);
  EXPECT_EQ(ScreenFraming(p, Post("18446744073709551616")).status, 400);  // 20 digits
  EXPECT_EQ(ScreenFraming(p, Post("9999999999999999999")).status, 413);
  EXPECT_EQ(ScreenFraming(p, Post("-1")).status, 400);
  EXPECT_EQ(ScreenFraming(p, Post("+5")).status, 400);
  EXPECT_EQ(ScreenFraming(p, Post("")).status, 400);
  RequestHead two = Post();
  two.content_length_headers = 2;
  EXPECT_EQ(ScreenFraming(p, two).status, 400);
  RequestHead chunked = Post(std::nullopt);
  chunked.transfer_encoding = "Chunked";
  EXPECT_FALSE(ScreenFraming(p, chunked).refused());
  chunked.transfer_encoding = "gzip, chunked";
  EXPECT_EQ(ScreenFraming(p, chunked).status, 501);
  RequestHead both = Post();
  both.transfer_encoding = "chunked";
  EXPECT_EQ(ScreenFraming(p, both).status, 400);
  for (const char* enc : {"gzip", "deflate", "br", "identity", "GZIP"}) {
    RequestHead e = Post();
    e.content_encoding = enc;
    EXPECT_FALSE(ScreenFraming(p, e).refused()) << enc;
  }
  RequestHead zstd = Post();
  zstd.content_encoding = "zstd";
  EXPECT_EQ(ScreenFraming(p, zstd).status, 415);
  RequestHead form = Post();
  form.content_type = "multipart/form-data; boundary=x";
  EXPECT_EQ(ScreenFraming(p, form).status, 415);
  RequestHead get;
  get.method = "GET";
  EXPECT_FALSE(ScreenFraming(p, get).refused());
  get.content_length = "0";
  EXPECT_FALSE(ScreenFraming(p, get).refused());
  get.content_length = "5";
  EXPECT_EQ(ScreenFraming(p, get).status, 400);
  for (const char* m : {"PUT", "DELETE", "PATCH", "PRI", "CONNECT", "TRACE"}) {
    RequestHead other;
    other.method = m;
    EXPECT_EQ(ScreenFraming(p, other).status, 405) << m;
  }
}

}  // namespace
}  // namespace flashkv
