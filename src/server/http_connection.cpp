#include "server/http_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace flashkv {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

thread_local ConnectionContext* t_current = nullptr;

// How long a connection whose request body was refused unread keeps discarding it.
constexpr milliseconds kLinger{2000};

// poll() for `events`, retried on EINTR until `wait` has passed; > 0 when ready.
int PollFor(int fd, short events, milliseconds wait) {
  const Clock::time_point end = Clock::now() + wait;
  while (true) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, int(std::clamp<int64_t>(left, 0, INT32_MAX)));
    if (r >= 0 || errno != EINTR) return r;
  }
}

bool AddressOf(const sockaddr_storage& addr, socklen_t len, std::string* ip, int* port) {
  char h[NI_MAXHOST];
  char p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, h, sizeof(h), p, sizeof(p),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  *ip = h;
  *port = std::atoi(p);
  return true;
}

// A connection's socket as cpp-httplib reads and writes it, with the deadlines: while the
// request line and headers are read, no read waits past the header deadline.
class GuardedStream : public httplib::Stream {
 public:
  GuardedStream(int fd, const ConnectionTimeouts& timeouts) : fd_(fd), timeouts_(timeouts) {}
  void SetGate(ConnectionGate* gate, uint64_t id) {
    gate_ = gate;
    id_ = id;
  }

  void BeginRequest() {
    header_deadline_ = Clock::now() + timeouts_.header;
    reading_headers_ = true;
    chunks_ = ChunkState::kOff;
  }
  // `chunked`: the body that follows is chunked; its framing is checked as it is read.
  void HeadersDone(bool chunked) {
    reading_headers_ = false;
    if (chunked) {
      chunks_ = ChunkState::kSize;
      chunk_digits_ = 0;
      chunk_left_ = 0;
    }
  }
  bool reading_headers() const { return reading_headers_; }
  bool Buffered() const { return off_ < size_; }

  bool is_readable() const override { return Buffered() || PollFor(fd_, POLLIN, ReadWait()) > 0; }
  bool is_writable() const override {
    return PollFor(fd_, POLLOUT, timeouts_.write) > 0 && PeerOpen();
  }

  ssize_t read(char* ptr, size_t size) override {
    // A client that keeps sending never makes a read wait, so the deadline is checked here
    // too, not only in the wait.
    if (reading_headers_ && Clock::now() >= header_deadline_) return -1;
    if (!Buffered()) {
      if (!is_readable()) return -1;
      // The line reader asks for one byte at a time; read ahead into the buffer.
      const ssize_t n = Recv(buf_, sizeof(buf_));
      if (n <= 0) return n;
      off_ = 0;
      size_ = size_t(n);
    }
    const size_t n = std::min(size, size_ - off_);
    std::memcpy(ptr, buf_ + off_, n);
    off_ += n;
    if (chunks_ != ChunkState::kOff && !CheckChunkFraming(ptr, n)) return -1;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (PollFor(fd_, POLLOUT, milliseconds(0)) <= 0) {
      // The client is not taking the answer: while this waits, the gate may drop the
      // connection for a newcomer (a client that stops reading cannot hold a slot), and
      // past the write timeout it ends.
      if (gate_ != nullptr) gate_->SetStalled(id_, true);
      const bool ready = PollFor(fd_, POLLOUT, timeouts_.write) > 0;
      if (gate_ != nullptr) gate_->SetStalled(id_, false);
      if (!ready) return -1;
    }
    while (true) {
      const ssize_t n = send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        !AddressOf(addr, len, &ip, &port)) {
      ip.clear();
      port = -1;
    }
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        !AddressOf(addr, len, &ip, &port)) {
      ip.clear();
      port = -1;
    }
  }
  socket_t socket() const override { return fd_; }

 private:
  milliseconds ReadWait() const {
    if (!reading_headers_) return timeouts_.read;
    const auto left = std::chrono::duration_cast<milliseconds>(header_deadline_ - Clock::now());
    return std::clamp(left, milliseconds(0), timeouts_.read);
  }
  ssize_t Recv(char* into, size_t size) const {
    while (true) {
      const ssize_t n = recv(fd_, into, size, 0);
      if (n >= 0 || errno != EINTR) return n;
    }
  }
  // False once the peer closed: a readable socket whose peek reads nothing. (Bytes waiting
  // are a pipelined request: still open.)
  bool PeerOpen() const {
    if (PollFor(fd_, POLLIN, milliseconds(0)) <= 0) return true;
    char c;
    return recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  // The framing of a chunked body, checked as cpp-httplib reads it: a chunk size that is
  // not hexadecimal (a negative one, say) or too long to be a size ends the request at
  // once (400) — cpp-httplib's own strtoul took "-5" for a huge size and waited for the
  // bytes until the read timeout.
  enum class ChunkState { kOff, kSize, kExt, kSizeLF, kData, kDataCR, kDataLF, kTrailer };
  bool CheckChunkFraming(const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const char c = p[i];
      switch (chunks_) {
        case ChunkState::kOff:
          return true;  // the body ended; what follows is the next request
        case ChunkState::kSize:
          if (std::isxdigit(static_cast<unsigned char>(c))) {
            if (++chunk_digits_ > 15) return false;
            chunk_left_ = chunk_left_ * 16 +
                          uint64_t(std::isdigit(static_cast<unsigned char>(c))
                                       ? c - '0'
                                       : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
          } else if ((c == ' ' || c == '\t') && chunk_digits_ == 0) {
            // Leading blanks, as strtoul skips them.
          } else if (chunk_digits_ == 0) {
            return false;  // "-5", "", "x": not a size
          } else if (c == ';' || c == ' ' || c == '\t') {
            chunks_ = ChunkState::kExt;
          } else if (c == '\r') {
            chunks_ = ChunkState::kSizeLF;
          } else if (c == '\n') {
            EndSizeLine();
          } else {
            return false;
          }
          break;
        case ChunkState::kExt:
          if (c == '\n') EndSizeLine();
          break;
        case ChunkState::kSizeLF:
          if (c != '\n') return false;
          EndSizeLine();
          break;
        case ChunkState::kData: {
          const uint64_t take = std::min<uint64_t>(chunk_left_, n - i);
          chunk_left_ -= take;
          i += take - 1;
          if (chunk_left_ == 0) chunks_ = ChunkState::kDataCR;
          break;
        }
        case ChunkState::kDataCR:
          if (c == '\r') {
            chunks_ = ChunkState::kDataLF;
          } else if (c == '\n') {
            StartSizeLine();
          } else {
            return false;
          }
          break;
        case ChunkState::kDataLF:
          if (c != '\n') return false;
          StartSizeLine();
          break;
        case ChunkState::kTrailer:
          // Trailer lines until an empty one ends the body.
          if (c == '\n') {
            if (chunk_digits_ == 0) chunks_ = ChunkState::kOff;
            chunk_digits_ = 0;
          } else if (c != '\r') {
            chunk_digits_ = 1;  // the line is not empty
          }
          break;
      }
    }
    return true;
  }
  void StartSizeLine() {
    chunks_ = ChunkState::kSize;
    chunk_digits_ = 0;
    chunk_left_ = 0;
  }
  void EndSizeLine() {
    if (chunk_left_ == 0) {
      chunks_ = ChunkState::kTrailer;
      chunk_digits_ = 0;
    } else {
      chunks_ = ChunkState::kData;
    }
  }

  const int fd_;
  const ConnectionTimeouts timeouts_;
  ChunkState chunks_ = ChunkState::kOff;
  int chunk_digits_ = 0;
  uint64_t chunk_left_ = 0;
  ConnectionGate* gate_ = nullptr;
  uint64_t id_ = 0;
  Clock::time_point header_deadline_{};
  bool reading_headers_ = false;
  char buf_[4096];
  size_t off_ = 0;
  size_t size_ = 0;
};

std::string PeerOf(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  std::string ip;
  int port = 0;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      !AddressOf(addr, len, &ip, &port)) {
    return std::string();
  }
  return ip;
}

}  // namespace

ConnectionContext* ConnectionContext::Current() {
  return t_current;
}

void ConnectionContext::Answering() {
  if (gate_ != nullptr) gate_->SetPhase(id_, ConnectionGate::Phase::kAnswering);
}

ConnectionThreads::ConnectionThreads(size_t max_threads)
    : max_threads_(std::max<size_t>(1, max_threads)) {}

ConnectionThreads::~ConnectionThreads() {
  shutdown();
}

void ConnectionThreads::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(std::move(fn));
  if (idle_ >= jobs_.size() || threads_.size() >= max_threads_) {
    cv_.notify_one();
    return;
  }
  threads_.emplace_back([this] { Worker(); });
}

void ConnectionThreads::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    cv_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
    --idle_;
    if (jobs_.empty()) return;  // stopping, nothing left
    std::function<void()> fn = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
}

void ConnectionThreads::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits, ConnectionTimeouts timeouts,
                                     std::string refusal)
    : gate_(limits), timeouts_(timeouts), refusal_(std::move(refusal)) {
  // Room beyond the cap for the threads that admit newcomers while the cap is full.
  const size_t threads = size_t(std::max(1, limits.max_connections)) + 16;
  new_task_queue = [threads] { return new ConnectionThreads(threads); };
}

void GuardedHttpServer::WidenBacklog() {
  // listen() on a listening socket only changes its backlog.
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, SOMAXCONN);
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  uint64_t id = 0;
  if (!gate_.Admit(sock, PeerOf(sock), &id)) {
    // Every open connection is being answered: say so without waiting on this client.
    (void)send(sock, refusal_.data(), refusal_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(sock, SHUT_RDWR);
    close(sock);
    return false;
  }
  ConnectionContext ctx;
  ctx.gate_ = &gate_;
  ctx.id_ = id;
  t_current = &ctx;
  GuardedStream strm(sock, timeouts_);
  strm.SetGate(&gate_, id);
  bool ret = false;
  for (int left = std::max(1, timeouts_.max_requests); left > 0 && svr_sock_ != INVALID_SOCKET;
       --left) {
    gate_.SetPhase(id, ConnectionGate::Phase::kIdle);
    if (!strm.Buffered() && PollFor(sock, POLLIN, timeouts_.idle) <= 0) break;
    gate_.SetPhase(id, ConnectionGate::Phase::kReadingRequest);
    strm.BeginRequest();
    ctx.close_after_ = false;
    bool closed = false;
    ret = process_request(strm, left == 1, closed, [&strm](httplib::Request& req) {
      std::string te = req.get_header_value("Transfer-Encoding");
      for (char& c : te) c = char(std::tolower(static_cast<unsigned char>(c)));
      strm.HeadersDone(te.find("chunked") != std::string::npos);
    });
    // A head that never parsed (malformed, too long, past its deadline) got its 400; what
    // follows on this connection cannot be trusted to start a request.
    if (!ret || closed || ctx.close_after_ || strm.reading_headers()) break;
  }
  t_current = nullptr;
  if (ctx.close_after_) {
    // The client may still be sending the body this answer refused. Closing with unread
    // bytes would reset the connection and could destroy the answer before the client
    // reads it, so: end our side, then discard what arrives for a short while.
    gate_.SetPhase(id, ConnectionGate::Phase::kIdle);
    ::shutdown(sock, SHUT_WR);
    const Clock::time_point end = Clock::now() + kLinger;
    char sink[16384];
    while (Clock::now() < end &&
           PollFor(sock, POLLIN, std::chrono::duration_cast<milliseconds>(end - Clock::now())) >
               0 &&
           recv(sock, sink, sizeof(sink), 0) > 0) {
    }
  }
  gate_.Release(id);
  ::shutdown(sock, SHUT_RDWR);
  close(sock);
  return ret;
}

}  // namespace flashkv
