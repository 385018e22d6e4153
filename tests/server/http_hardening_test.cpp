// The transport against hostile clients, on real loopback sockets: compressed bodies are
// bounded after decoding, framing and method errors are answered from the headers alone
// (never after waiting on a body), hundreds of connections trickling their headers do not
// keep /health or a real request out, the connection cap answers 503 only when every
// connection is being answered, and without an API key only JSON POSTs to a loopback or
// listened Host are served. No assertion depends on how fast the machine is: waits are
// generous upper bounds on events that happen at once when the server is right.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "server/http_server.h"

namespace flashkv {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A client socket with raw bytes in and out; reads wait at most `limit`.
class RawClient {
 public:
  // `from`: the loopback address to connect from (Linux routes all of 127/8 to lo, so
  // 127.0.0.2 is another client address on the same machine).
  explicit RawClient(int port, const char* from = nullptr) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (from != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      inet_pton(AF_INET, from, &local.sin_addr);
      if (bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) return;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient(RawClient&& o) noexcept : fd_(std::exchange(o.fd_, -1)), connected_(o.connected_) {}

  bool connected() const { return connected_; }
  bool Send(std::string_view data) {
    return send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == ssize_t(data.size());
  }
  // Everything until the peer closes, or what arrived within `limit`.
  std::string ReadAll(milliseconds limit = milliseconds(60000)) {
    std::string out;
    const Clock::time_point end = Clock::now() + limit;
    while (Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
      if (poll(&p, 1, int(std::max<int64_t>(left, 0))) <= 0) break;
      char buf[65536];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, size_t(n));
    }
    return out;
  }
  // What arrived until `needle` did (or the peer closed, or `limit` passed).
  std::string ReadUntil(std::string_view needle, milliseconds limit = milliseconds(60000)) {
    std::string out;
    const Clock::time_point end = Clock::now() + limit;
    while (out.find(needle) == std::string::npos && Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
      if (poll(&p, 1, int(std::max<int64_t>(left, 0))) <= 0) break;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, size_t(n));
    }
    return out;
  }
  // True once the server closed (end-of-file or reset) within `limit`.
  bool ClosedWithin(milliseconds limit) {
    ReadAll(limit);
    return closed_;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

int StatusOf(const std::string& response) {
  if (!response.starts_with("HTTP/1.1 ")) return -1;
  return std::atoi(response.c_str() + 9);
}

std::string Gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, uLong(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = uInt(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// zlib-wrapped deflate (Content-Encoding: deflate).
std::string Deflate(const std::string& data) {
  uLongf n = compressBound(uLong(data.size()));
  std::string out(n, '\0');
  compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(data.data()),
            uLong(data.size()), 6);
  out.resize(n);
  return out;
}

// `n` zero bytes gzipped, without holding them: a bomb of any size in little memory.
std::string GzipZeros(size_t n) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<char> zeros(size_t(1) << 20, 0);
  std::string out;
  std::vector<char> buf(size_t(1) << 16);
  size_t left = n;
  int flush = Z_NO_FLUSH;
  do {
    const size_t chunk = std::min(left, zeros.size());
    left -= chunk;
    flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    z.next_in = reinterpret_cast<Bytef*>(zeros.data());
    z.avail_in = uInt(chunk);
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = uInt(buf.size());
      deflate(&z, flush);
      out.append(buf.data(), buf.size() - z.avail_out);
    } while (z.avail_out == 0);
  } while (flush != Z_FINISH);
  deflateEnd(&z);
  return out;
}

class HttpHardeningTest : public ::testing::Test {
 protected:
  void Start(HttpServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.error_body = [](const std::string&, int status, const std::string& message) {
      return "{\"status\":" + std::to_string(status) + ",\"message\":\"" + message + "\"}";
    };
    server_ = std::make_unique<HttpServer>(o);
    server_->Get("/health", [](const HttpRequest&) {
      HttpResponse r;
      r.body = "{\"status\":\"ok\"}";
      return r;
    });
    server_->Post("/echo", [this](const HttpRequest& req) {
      ++echoed_;
      HttpResponse r;
      r.body = std::to_string(req.body.size()) + ":" + req.body.substr(0, 64);
      return r;
    });
    // Streams 64 KiB chunks until the client is gone (or 1 GiB).
    server_->Get("/flood", [](const HttpRequest&) {
      HttpResponse r;
      r.stream = [](StreamWriter& w) {
        const std::string chunk(64 << 10, 'f');
        for (int i = 0; i < 16384 && w.Write(chunk); ++i) {
        }
      };
      return r;
    });
    server_->Get("/block", [this](const HttpRequest&) {
      std::unique_lock<std::mutex> lock(mu_);
      ++blocked_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
      return HttpResponse{};
    });
    ASSERT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { (void)server_->Serve(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(60, 0);
    for (int i = 0; i < 500 && !client_->Get("/health"); ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  void TearDown() override {
    ReleaseBlocked();
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  // Lets every /block handler return and joins the clients StartBlocked started (also at
  // TearDown, however the test ends).
  void ReleaseBlocked() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
      cv_.notify_all();
    }
    for (std::thread& th : block_clients_) th.join();
    block_clients_.clear();
  }
  // Starts GET /block on its own connection (from 127.0.0.1) until its handler is the n-th
  // one blocked. A connection whose answer was just read may still count as being
  // answered for a moment (its thread has not yet marked it idle or closed it), and a
  // newcomer refused with 503 then is retried; false after 60 s.
  bool StartBlocked(int n) {
    const Clock::time_point end = Clock::now() + seconds(60);
    while (Clock::now() < end) {
      auto done = std::make_shared<std::atomic<bool>>(false);
      block_clients_.emplace_back([this, done] {
        httplib::Client c("127.0.0.1", server_->port());
        c.set_read_timeout(120, 0);
        c.Get("/block");
        *done = true;
      });
      std::unique_lock<std::mutex> lock(mu_);
      while (blocked_ < n && !*done && Clock::now() < end) cv_.wait_for(lock, milliseconds(10));
      if (blocked_ >= n) return true;
    }
    return false;
  }
  RawClient Raw(const char* from = nullptr) { return RawClient(server_->port(), from); }
  std::string Host() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
  std::atomic<int> echoed_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  int blocked_ = 0;
  bool released_ = false;
  std::vector<std::thread> block_clients_;  // StartBlocked's, joined by ReleaseBlocked
};

TEST_F(HttpHardeningTest, GzipBodiesAreBoundedAfterDecoding) {
  HttpServerOptions o;
  o.max_body_bytes = size_t(1) << 20;
  Start(o);
  httplib::Headers gz{{"Content-Encoding", "gzip"}};
  // Within the limit once decoded: the handler gets the decoded bytes.
  const std::string doc = "{\"x\":\"" + std::string(900000, 'a') + "\"}";
  auto ok = client_->Post("/echo", gz, Gzip(doc), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, std::to_string(doc.size()) + ":" + doc.substr(0, 64));
  // 256 MiB of zeros in ~250 KB: refused once 1 MiB is decoded, the handler never called.
  const std::string bomb = GzipZeros(size_t(256) << 20);
  ASSERT_LT(bomb.size(), o.max_body_bytes);
  const int before = echoed_;
  auto big = client_->Post("/echo", gz, bomb, "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("exceeds the limit of 1048576 bytes once decompressed"),
            std::string::npos);
  EXPECT_EQ(echoed_, before);
  // A chunked body has no Content-Length to refuse up front; it is bounded as it streams.
  RawClient raw = Raw();
  ASSERT_TRUE(raw.Send("POST /echo HTTP/1.1\r\nHost: " + Host() +
                       "\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n"));
  char size_line[32];
  std::snprintf(size_line, sizeof(size_line), "%zx\r\n", bomb.size());
  raw.Send(size_line);
  raw.Send(bomb);
  raw.Send("\r\n0\r\n\r\n");
  EXPECT_EQ(StatusOf(raw.ReadAll()), 413);
  // A corrupt stream is a 400, not a crash.
  auto bad = client_->Post("/echo", gz, std::string("\x1f\x8b not gzip"), "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(echoed_, before);
}

// Issue 34: a coding name is case-insensitive (RFC 9110 §8.4.1), a gzip body of several
// members is all of them (RFC 1952 §2.2), a truncated one is a 400, and a header holding a
// control byte is refused before the body is read, a chunk size that is not one is a 400.
TEST_F(HttpHardeningTest, GzipAnyCaseEveryMemberAndNoControlBytesInHeaders) {
  HttpServerOptions o;
  o.max_body_bytes = size_t(1) << 20;
  Start(o);
  const std::string doc = "{\"x\":\"" + std::string(5000, 'a') + "\"}";
  for (const char* name : {"GZIP", "Gzip", " gzip ", "DEFLATE"}) {
    const std::string coded =
        std::string(name).find_first_of("Dd") != std::string::npos ? Deflate(doc) : Gzip(doc);
    auto r = client_->Post("/echo", {{"Content-Encoding", name}}, coded, "application/json");
    ASSERT_TRUE(r) << name;
    EXPECT_EQ(r->status, 200) << name;
    EXPECT_EQ(r->body, std::to_string(doc.size()) + ":" + doc.substr(0, 64)) << name;
  }
  const std::string a = "{\"x\":\"" + std::string(3000, 'b'), b = std::string(2000, 'c') + "\"}";
  auto multi =
      client_->Post("/echo", {{"Content-Encoding", "gzip"}}, Gzip(a) + Gzip(b), "application/json");
  ASSERT_TRUE(multi);
  EXPECT_EQ(multi->status, 200);
  EXPECT_EQ(multi->body, std::to_string(a.size() + b.size()) + ":" + a.substr(0, 64));
  const std::string whole = Gzip(doc);
  auto cut = client_->Post("/echo", {{"Content-Encoding", "gzip"}},
                           whole.substr(0, whole.size() / 2), "application/json");
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->status, 400);

  const int before = echoed_;
  for (const std::string& bad : {std::string("X-A: a\0b\r\n", 10), std::string("X-A: a\x01b\r\n"),
                                 std::string("X-A: a\x7f\r\n")}) {
    RawClient raw = Raw();
    ASSERT_TRUE(raw.Send("POST /echo HTTP/1.1\r\nHost: " + Host() +
                         "\r\nContent-Type: application/json\r\n" + bad +
                         "Content-Length: 2\r\n\r\n{}"));
    EXPECT_EQ(StatusOf(raw.ReadAll()), 400);
  }
  EXPECT_EQ(echoed_, before);

  // Chunk sizes that are no size: answered at once, not at the 30 s read timeout.
  // Well-formed framing with an extension and a blank before a size still reads.
  for (const std::string bad :
       {"-5\r\n", "\r\n", "zz\r\n", "fffffffffffffffff\r\n", "5\r\n{}{}{}X\r\n"}) {
    RawClient raw = Raw();
    ASSERT_TRUE(
        raw.Send("POST /echo HTTP/1.1\r\nHost: " + Host() +
                 "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + bad));
    EXPECT_EQ(StatusOf(raw.ReadAll(seconds(20))), 400) << bad;
  }
  RawClient good = Raw();
  ASSERT_TRUE(good.Send("POST /echo HTTP/1.1\r\nHost: " + Host() +
                        "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                        "Connection: close\r\n\r\n3;ext=1\r\n{\"a\r\n 5\r\n\":1}\n\r\n0\r\n\r\n"));
  const std::string answer = good.ReadAll(seconds(20));
  EXPECT_EQ(StatusOf(answer), 200) << answer;
  EXPECT_NE(answer.find("8:{\"a\":1}\n"), std::string::npos) << answer;
}

// Issue 34: clients that ask for a streamed answer and never read it held every slot (an
// answer in progress was never dropped), so everyone else got 503 until the write timeout.
// A write waiting on its client now counts as waiting on the client: the gate drops the
// longest-stalled one for a newcomer.
TEST_F(HttpHardeningTest, ClientsThatStopReadingDoNotHoldTheSlots) {
  HttpServerOptions o;
  o.threads = 2;
  o.max_client_connections = 0;  // the total cap, from one address
  o.write_timeout_ms = 600000;   // only the gate can free the slots in time
  Start(o);
  std::vector<RawClient> readers_that_stop;
  for (int i = 0; i < 2; ++i) {
    readers_that_stop.push_back(Raw());
    ASSERT_TRUE(
        readers_that_stop.back().Send("GET /flood HTTP/1.1\r\nHost: " + Host() + "\r\n\r\n"));
  }
  // Their answers fill the socket buffers at once; /health gets in within 20 s (at once
  // when the server is right; never before the write timeout when it is not).
  int status = 0;
  const Clock::time_point end = Clock::now() + seconds(20);
  while (Clock::now() < end && status != 200) {
    std::this_thread::sleep_for(milliseconds(100));
    RawClient c = Raw();
    c.Send("GET /health HTTP/1.1\r\nHost: " + Host() + "\r\nConnection: close\r\n\r\n");
    status = StatusOf(c.ReadAll(seconds(5)));
  }
  EXPECT_EQ(status, 200);
}

TEST_F(HttpHardeningTest, FramingErrorsAreAnsweredWithoutWaitingForABody) {
  HttpServerOptions o;
  o.max_body_bytes = 1000;
  o.read_timeout_ms = 600000;  // a server that waited for the body would not answer
  Start(o);
  struct Case {
    std::string head;
    int status;
  };
  const std::string post =
      "POST /echo HTTP/1.1\r\nHost: " + Host() + "\r\nContent-Type: application/json\r\n";
  const Case cases[] = {
      {post + "Content-Length: 99999999999999\r\n\r\n", 413},
      {post + "Content-Length: 1001\r\n\r\n", 413},
      {post + "Content-Length: 99999999999999999999999999\r\n\r\n", 400},
      {post + "Content-Length: -1\r\n\r\n", 400},
      {post + "Content-Length: 12abc\r\n\r\n", 400},
      {post + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
      {post + "Transfer-Encoding: gzip\r\n\r\n", 501},
      {post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400},
      {post + "Content-Encoding: zstd\r\nContent-Length: 5\r\n\r\n", 415},
      {"POST /echo HTTP/1.1\r\nHost: " + Host() +
           "\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: 500\r\n\r\n",
       415},
      {"PUT /echo HTTP/1.1\r\nHost: " + Host() + "\r\nContent-Length: 500\r\n\r\n", 405},
      {"GET /health HTTP/1.1\r\nHost: " + Host() + "\r\nContent-Length: 500\r\n\r\n", 400},
      {"POST /nowhere HTTP/1.1\r\nHost: " + Host() +
           "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
       404},
  };
  for (const Case& c : cases) {
    RawClient raw = Raw();
    ASSERT_TRUE(raw.Send(c.head));
    // No body follows: the answer comes from the head, and the connection closes.
    const std::string response = raw.ReadAll();
    EXPECT_EQ(StatusOf(response), c.status) << c.head << response;
    EXPECT_NE(response.find("Connection: close"), std::string::npos) << c.head;
  }
  // A client that sends the refused body anyway still reads its answer (the server
  // discards the body instead of resetting the connection under it).
  RawClient eager = Raw();
  ASSERT_TRUE(eager.Send(post + "Content-Length: 200000\r\n\r\n" + std::string(200000, 'x')));
  EXPECT_EQ(StatusOf(eager.ReadAll()), 413);
  EXPECT_EQ(echoed_, 0);
}

TEST_F(HttpHardeningTest, SlowHeadersDoNotKeepOthersOut) {
  HttpServerOptions o;
  o.threads = 16;
  o.header_timeout_ms = 1000;
  Start(o);
  // 200 connections that send a request line and then one header line every 100 ms.
  std::vector<RawClient> slow;
  for (int i = 0; i < 200; ++i) {
    slow.emplace_back(server_->port());
    ASSERT_TRUE(slow.back().connected());
    slow.back().Send("GET /health HTTP/1.1\r\nHost: " + Host() + "\r\n");
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (int line = 0; !stop; ++line) {
      for (RawClient& c : slow) c.Send("X-Slow-" + std::to_string(line) + ": 1\r\n");
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  // Meanwhile whole requests are answered, each on its own connection.
  for (int i = 0; i < 5; ++i) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60, 0);
    auto h = c.Get("/health");
    ASSERT_TRUE(h) << i;
    EXPECT_EQ(h->status, 200);
    auto e = c.Post("/echo", "{\"a\":1}", "application/json");
    ASSERT_TRUE(e) << i;
    EXPECT_EQ(e->status, 200);
    EXPECT_EQ(e->body, "7:{\"a\":1}");
  }
  // Every trickling connection ends: dropped for a newcomer, or at its header deadline.
  for (RawClient& c : slow) EXPECT_TRUE(c.ClosedWithin(milliseconds(60000)));
  stop = true;
  trickle.join();
}

TEST_F(HttpHardeningTest, HeadersSentInPiecesWithinTheDeadlineAreServed) {
  HttpServerOptions o;
  o.header_timeout_ms = 60000;
  Start(o);
  RawClient raw = Raw();
  raw.Send("GET /health HTTP/1.1\r\n");
  std::this_thread::sleep_for(milliseconds(50));
  raw.Send("Host: " + Host() + "\r\n");
  std::this_thread::sleep_for(milliseconds(50));
  raw.Send("Connection: close\r\n\r\n");
  const std::string response = raw.ReadAll();
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_NE(response.find("{\"status\":\"ok\"}"), std::string::npos);
}

TEST_F(HttpHardeningTest, A503OnlyWhenEveryConnectionIsBeingAnswered) {
  HttpServerOptions o;
  o.threads = 3;
  o.max_client_connections = 0;  // the total cap, from one address
  Start(o);
  // An idle keep-alive connection (its request answered) makes room for newcomers.
  RawClient idle = Raw();
  ASSERT_TRUE(idle.Send("GET /health HTTP/1.1\r\nHost: " + Host() + "\r\n\r\n"));
  ASSERT_NE(idle.ReadUntil("{\"status\":\"ok\"}").find("200 OK"), std::string::npos);
  // Requests the server is answering, started one after the other so each is being
  // answered before the next arrives: each newcomer may only push out an idle connection.
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(StartBlocked(i)) << i;
  EXPECT_TRUE(idle.ClosedWithin(milliseconds(60000)));
  RawClient refused = Raw();
  const std::string response = refused.ReadAll();
  EXPECT_EQ(StatusOf(response), 503) << response;
  EXPECT_NE(response.find("too many open connections"), std::string::npos);
  ReleaseBlocked();
  auto h = client_->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

// Issue 34: one address filled every slot with requests being answered, and every other
// client got 503 until they ended. By default an address holds at most three quarters of
// the slots (3 of 4 here): its fourth is refused while another address is served.
TEST_F(HttpHardeningTest, OneAddressCannotTakeEverySlot) {
  HttpServerOptions o;
  o.threads = 4;
  Start(o);
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(StartBlocked(i)) << i;
  RawClient fourth = Raw("127.0.0.1");
  ASSERT_TRUE(fourth.connected());
  fourth.Send("GET /block HTTP/1.1\r\nHost: " + Host() + "\r\n\r\n");
  const std::string refused = fourth.ReadAll();
  EXPECT_EQ(StatusOf(refused), 503) << refused;
  // (Retried on 503 for a while: the connection Start() polled /health on may not be
  // released yet. Without the per-address cap the fourth holds the last slot and every
  // try is refused.)
  int status = 0;
  const Clock::time_point end = Clock::now() + seconds(20);
  while (status != 200 && Clock::now() < end) {
    RawClient other = Raw("127.0.0.2");
    ASSERT_TRUE(other.connected()) << "cannot connect from 127.0.0.2";
    other.Send("GET /health HTTP/1.1\r\nHost: " + Host() + "\r\nConnection: close\r\n\r\n");
    status = StatusOf(other.ReadAll());
    if (status != 200) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(status, 200);
}

// Issue 34: at the cap a newcomer pushed out the connection that had waited longest,
// whoever's it was, so one address opening connections in a loop dropped another
// address's request while it was still being sent. The connection dropped is now one of
// the address holding the most — with the per-address cap (default) and without it.
TEST_F(HttpHardeningTest, AFloodPushesOutItsOwnConnectionsNotAnotherAddresss) {
  for (const int per_address : {-1, 0}) {
    SCOPED_TRACE(per_address);
    HttpServerOptions o;
    o.threads = 4;
    o.max_client_connections = per_address;
    o.header_timeout_ms = 120000;  // only the gate may end the slow request
    Start(o);
    RawClient slow = Raw("127.0.0.2");
    ASSERT_TRUE(slow.connected()) << "cannot connect from 127.0.0.2";
    ASSERT_TRUE(slow.Send("GET /health HTTP/1.1\r\nHost: " + Host() + "\r\n"));
    // Twelve connections from 127.0.0.1, each sending the start of a request.
    std::vector<RawClient> flood;
    for (int i = 0; i < 12; ++i) {
      flood.push_back(Raw("127.0.0.1"));
      ASSERT_TRUE(flood.back().connected());
      flood.back().Send("GET /health HTTP/1.1\r\n");
      std::this_thread::sleep_for(milliseconds(20));
    }
    // Nine of them were dropped for newcomers; the slow request was not.
    int dropped = 0;
    for (RawClient& c : flood) dropped += c.ClosedWithin(milliseconds(200)) ? 1 : 0;
    EXPECT_GE(dropped, 8);
    ASSERT_TRUE(slow.Send("Connection: close\r\n\r\n"));
    const std::string answer = slow.ReadAll(seconds(60));
    EXPECT_EQ(StatusOf(answer), 200) << answer;
    flood.clear();
    TearDown();
    server_.reset();
  }
}

TEST_F(HttpHardeningTest, WithoutAKeyOnlyJsonPostsToThisServersHostAreServed) {
  HttpServerOptions o;
  o.allowed_hosts = {"my.box"};
  Start(o);
  auto text = client_->Post("/echo", "{}", "text/plain");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 415);
  EXPECT_NE(text->body.find("Content-Type must be application/json"), std::string::npos);
  auto form = client_->Post("/echo", "a=1", "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 415);
  for (const char* type : {"application/json", "application/json; charset=utf-8",
                           "Application/JSON", "application/vnd.api+json"}) {
    auto json = client_->Post("/echo", "{}", type);
    ASSERT_TRUE(json);
    EXPECT_EQ(json->status, 200) << type;
  }
  const int port = server_->port();
  const std::pair<std::string, int> hosts[] = {
      {"evil.example", 403},
      {"evil.example:" + std::to_string(port), 403},
      {"127.0.0.1.evil.example", 403},
      {"localhost:" + std::to_string(port), 200},
      {"LOCALHOST", 200},
      {"app.localhost", 200},
      {"127.0.0.1:" + std::to_string(port), 200},
      {"[::1]:" + std::to_string(port), 200},
      {"my.box:" + std::to_string(port), 200},
  };
  for (const auto& [host, status] : hosts) {
    RawClient raw = Raw();
    raw.Send("GET /health HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
    const std::string response = raw.ReadAll();
    EXPECT_EQ(StatusOf(response), status) << host;
    if (status == 403) {
      EXPECT_NE(response.find("is not this server's"), std::string::npos);
    }
  }
}

TEST_F(HttpHardeningTest, AnApiKeyLiftsTheBrowserRules) {
  HttpServerOptions o;
  o.api_key = "k";
  Start(o);
  RawClient raw = Raw();
  raw.Send(
      "POST /echo HTTP/1.1\r\nHost: evil.example\r\nx-api-key: k\r\n"
      "Content-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
  EXPECT_EQ(StatusOf(raw.ReadAll()), 200);
  // Without the key the request is refused before its body is read.
  RawClient no_key = Raw();
  no_key.Send(
      "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 1000\r\n\r\n");
  EXPECT_EQ(StatusOf(no_key.ReadAll()), 401);
}

}  // namespace
}  // namespace flashkv
