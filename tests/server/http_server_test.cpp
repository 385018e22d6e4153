// The transport on a real loopback socket: routing, error bodies, the body limit, the API
// key, CORS, chunked streams, and noticing a client that closed its connection.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

namespace flashkv {
namespace {

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.threads = 8;
    o.error_body = [](const std::string& path, int status, const std::string& message) {
      return "{\"path\":\"" + path + "\",\"status\":" + std::to_string(status) + ",\"message\":\"" +
             message + "\"}";
    };
    server_ = std::make_unique<HttpServer>(o);
    server_->Get("/hello", [](const HttpRequest&) {
      HttpResponse r;
      r.body = "{\"hi\":1}";
      r.headers.emplace_back("x-test", "yes");
      return r;
    });
    server_->Get("/items/{param}", [](const HttpRequest& req) {
      HttpResponse r;
      r.body = "item " + req.path_param;
      r.content_type = "text/plain";
      return r;
    });
    server_->Post("/echo", [](const HttpRequest& req) {
      HttpResponse r;
      r.body = req.body + "|" + req.Header("X-CUSTOM");
      return r;
    });
    server_->Get("/stream", [](const HttpRequest&) {
      HttpResponse r;
      r.content_type = "text/event-stream";
      r.stream = [](StreamWriter& w) {
        for (int i = 0; i < 3; ++i) w.Write("data: " + std::to_string(i) + "\n\n");
      };
      return r;
    });
    server_->Get("/wait", [this](const HttpRequest& req) {
      // Polls like the API handlers do while the engine works.
      for (int i = 0; i < 300 && req.client_connected(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      saw_disconnect_ = !req.client_connected();
      waited_ = true;
      return HttpResponse{};
    });
    ASSERT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { (void)server_->Serve(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    for (int i = 0; i < 100 && !client_->Get("/hello"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
  }

  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
  std::atomic<bool> saw_disconnect_{false};
  std::atomic<bool> waited_{false};
};

TEST_F(HttpServerTest, RoutesParamsAndErrorBodies) {
  Start({});
  auto r = client_->Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{\"hi\":1}");
  EXPECT_EQ(r->get_header_value("x-test"), "yes");
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));

  auto item = client_->Get("/items/abc-1");
  ASSERT_TRUE(item);
  EXPECT_EQ(item->body, "item abc-1");
  auto nested = client_->Get("/items/a/b");
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->status, 404);

  auto missing = client_->Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body,
            "{\"path\":\"/nope\",\"status\":404,\"message\":\"unknown endpoint GET /nope\"}");

  auto echo =
      client_->Post("/echo", httplib::Headers{{"x-custom", "v"}}, "payload", "application/json");
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->body, "payload|v");
}

TEST_F(HttpServerTest, OversizedBodiesGet413) {
  HttpServerOptions o;
  o.max_body_bytes = 1000;
  Start(o);
  auto ok = client_->Post("/echo", std::string(1000, 'a'), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto big = client_->Post("/echo", std::string(1001, 'a'), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("exceeds the limit of 1000 bytes"), std::string::npos);
}

TEST_F(HttpServerTest, ApiKeyIsRequiredExceptOnPublicPaths) {
  HttpServerOptions o;
  o.api_key = "s3cret";
  o.public_paths = {"/items/x"};
  o.cors = true;
  Start(o);
  auto none = client_->Get("/hello");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_NE(none->body.find("missing or invalid API key"), std::string::npos);
  EXPECT_EQ(client_->Get("/hello", httplib::Headers{{"Authorization", "Bearer wrong"}})->status,
            401);
  EXPECT_EQ(client_->Get("/hello", httplib::Headers{{"Authorization", "Bearer s3cret"}})->status,
            200);
  EXPECT_EQ(client_->Get("/hello", httplib::Headers{{"x-api-key", "s3cret"}})->status, 200);
  EXPECT_EQ(client_->Get("/hello", httplib::Headers{{"x-api-key", "s3cre"}})->status, 401);
  EXPECT_EQ(client_->Get("/items/x")->status, 200);
  // CORS preflight needs no key and says what is allowed.
  auto pre = client_->Options("/hello");
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Methods"), "GET, POST, OPTIONS");
}

TEST_F(HttpServerTest, StreamsAreChunkedInOrder) {
  Start({});
  std::string got;
  auto r = client_->Get("/stream", [&](const char* data, size_t n) {
    got.append(data, n);
    return true;
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(r->get_header_value("Cache-Control"), "no-cache");
  EXPECT_EQ(got, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

TEST_F(HttpServerTest, HandlerSeesItsClientLeave) {
  Start({});
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string req = "GET /wait HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(write(fd, req.data(), req.size()), ssize_t(req.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  close(fd);
  for (int i = 0; i < 300 && !waited_; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(waited_);
  EXPECT_TRUE(saw_disconnect_);
}

}  // namespace
}  // namespace flashkv
