// What the transport refuses from a request's head alone, and the Host names that count as
// this server's when it runs without an API key.
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
  h.host = "127.0.0.1:8000";
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

TEST(RequestScreenTest, BrowserRulesOnlyWithoutAKey) {
  ScreenPolicy p;
  p.max_body_bytes = 100;
  RequestHead evil = Post();
  evil.host = "evil.example";
  evil.content_type = "text/plain";
  EXPECT_FALSE(ScreenBrowser(p, evil).refused());  // a key protects this server
  p.browser_rules = true;
  EXPECT_EQ(ScreenBrowser(p, evil).status, 403);
  evil.host = "localhost:8000";
  EXPECT_EQ(ScreenBrowser(p, evil).status, 415);
  evil.content_type = std::nullopt;
  EXPECT_EQ(ScreenBrowser(p, evil).status, 415);
  RequestHead get;
  get.method = "GET";
  get.host = "[::1]:8000";
  EXPECT_FALSE(ScreenBrowser(p, get).refused());
  get.host = std::nullopt;  // HTTP/1.0 clients send none; a browser always does
  EXPECT_FALSE(ScreenBrowser(p, get).refused());
  get.host = "192.168.1.20:8000";
  EXPECT_EQ(ScreenBrowser(p, get).status, 403);
  p.listened_hosts = {"192.168.1.20"};
  EXPECT_FALSE(ScreenBrowser(p, get).refused());
  get.host = "box.lan";
  EXPECT_EQ(ScreenBrowser(p, get).status, 403);
  p.allowed_hosts = {"Box.LAN"};
  EXPECT_FALSE(ScreenBrowser(p, get).refused());
  get.host = "other.lan";
  p.allowed_hosts = {"*"};
  EXPECT_FALSE(ScreenBrowser(p, get).refused());
}

TEST(RequestScreenTest, HostNamesAndLoopback) {
  EXPECT_EQ(HostName("[::1]:8000"), "::1");
  EXPECT_EQ(HostName("Example.COM:80"), "example.com");
  EXPECT_EQ(HostName(" localhost "), "localhost");
  EXPECT_EQ(HostName("::1"), "::1");
  for (const char* h : {"localhost", "LocalHost", "app.localhost", "127.0.0.1", "127.255.0.9",
                        "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h :
       {"0.0.0.0", "10.0.0.1", "::", "localhost.example", "127.0.0.1.nip.io", "128.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
  EXPECT_EQ(ListenedHosts("127.0.0.1"), std::vector<std::string>{"127.0.0.1"});
  // The wildcard stands for every interface address, loopback among them.
  const std::vector<std::string> all = ListenedHosts("0.0.0.0");
  EXPECT_NE(std::find(all.begin(), all.end(), "127.0.0.1"), all.end());
}

}  // namespace
}  // namespace flashkv
