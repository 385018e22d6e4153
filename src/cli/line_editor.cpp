#include "cli/line_editor.h"

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>

namespace flashkv::cli {
namespace {

// The terminal in raw mode for the lifetime of the object (restored on every path out).
// TCSADRAIN, not TCSAFLUSH: what was typed ahead (during a reply) stays to be read.
class RawMode {
 public:
  RawMode() {
    if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_iflag &= ~tcflag_t(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_lflag &= ~tcflag_t(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    ok_ = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
  }
  ~RawMode() {
    if (ok_) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_);
  }
  bool ok() const { return ok_; }

 private:
  termios saved_{};
  bool ok_ = false;
};

void Write(const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(STDOUT_FILENO, s.data() + off, s.size() - off);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    off += size_t(n);
  }
}

bool IsContinuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

}  // namespace

bool LineEditor::ReadByte(char* c) const {
  while (true) {
    if (TakeInterrupt()) {
      *c = 3;
      return true;
    }
    if (wake_fd_ >= 0) {
      pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      const int n = poll(fds, 2, -1);
      if (n < 0 && errno != EINTR) return false;
      if (n > 0 && (fds[1].revents & POLLIN) != 0) {
        char drain[64];
        while (read(wake_fd_, drain, sizeof drain) > 0) {
        }
      }
      if (n <= 0 || fds[0].revents == 0) continue;
    }
    const ssize_t n = read(STDIN_FILENO, c, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

LineEditor::LineEditor(std::string history_file)
    : history_file_(std::move(history_file)),
      tty_(isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1) {
  if (history_file_.empty()) return;
  std::ifstream in(history_file_);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) history_.push_back(line);
  }
}

LineEditor::~LineEditor() = default;

void LineEditor::AddHistory(const std::string& line) {
  if (line.empty() || line.find('\n') != std::string::npos) return;
  if (!history_.empty() && history_.back() == line) return;
  history_.push_back(line);
  if (!history_file_.empty()) {
    std::ofstream out(history_file_, std::ios::app);
    out << line << '\n';
  }
}

LineEditor::Result LineEditor::ReadLine(const std::string& prompt, std::string* line) {
  line->clear();
  if (TakeInterrupt()) {
    Write("^C\r\n");
    return Result::kInterrupt;
  }
  if (tty_) return ReadRaw(prompt, line);
  std::fputs(prompt.c_str(), stdout);
  std::fflush(stdout);
  if (!std::getline(std::cin, *line)) return Result::kEof;
  return Result::kLine;
}

void LineEditor::Redraw(const std::string& prompt, const std::string& buffer, size_t cursor) const {
  // Back to the column after the prompt, rewrite, clear the rest, put the cursor back by
  // the code points after it (one column each: wide characters are rare in prompts).
  size_t after = 0;
  for (size_t i = cursor; i < buffer.size(); ++i) {
    if (!IsContinuation(static_cast<unsigned char>(buffer[i]))) ++after;
  }
  std::string out = "\r" + prompt + buffer + "\033[K";
  if (after > 0) out += "\033[" + std::to_string(after) + "D";
  Write(out);
}

LineEditor::Result LineEditor::ReadRaw(const std::string& prompt, std::string* line) {
  RawMode raw;
  if (!raw.ok()) {
    tty_ = false;
    return ReadLine(prompt, line);
  }
  std::string buffer;
  size_t cursor = 0;
  size_t hist = history_.size();  // == size: the line being typed
  std::string typed;              // kept while browsing the history
  Write(prompt);
  while (true) {
    char c = 0;
    if (!ReadByte(&c)) return Result::kEof;
    const unsigned char u = static_cast<unsigned char>(c);
    auto prev = [&](size_t i) {
      do {
        --i;
      } while (i > 0 && IsContinuation(static_cast<unsigned char>(buffer[i])));
      return i;
    };
    auto next = [&](size_t i) {
      do {
        ++i;
      } while (i < buffer.size() && IsContinuation(static_cast<unsigned char>(buffer[i])));
      return i;
    };
    auto browse = [&](size_t to) {
      if (hist == history_.size()) typed = buffer;
      hist = to;
      buffer = hist == history_.size() ? typed : history_[hist];
      cursor = buffer.size();
    };
    if (c == '\r' || c == '\n') {
      Write("\r\n");
      *line = buffer;
      return Result::kLine;
    }
    if (c == 3) {  // Ctrl+C
      Write("^C\r\n");
      return Result::kInterrupt;
    }
    if (c == 4) {  // Ctrl+D: end of input on an empty line, else delete under the cursor
      if (buffer.empty()) {
        Write("\r\n");
        return Result::kEof;
      }
      if (cursor < buffer.size()) buffer.erase(cursor, next(cursor) - cursor);
    } else if (c == 127 || c == 8) {
      if (cursor > 0) {
        const size_t p = prev(cursor);
        buffer.erase(p, cursor - p);
        cursor = p;
      }
    } else if (c == 1) {
      cursor = 0;
    } else if (c == 5) {
      cursor = buffer.size();
    } else if (c == 21) {  // Ctrl+U: delete to the start
      buffer.erase(0, cursor);
      cursor = 0;
    } else if (c == 11) {  // Ctrl+K: delete to the end
      buffer.erase(cursor);
    } else if (c == 23) {  // Ctrl+W: delete the word before the cursor
      size_t p = cursor;
      while (p > 0 && buffer[p - 1] == ' ') --p;
      while (p > 0 && buffer[p - 1] != ' ') --p;
      buffer.erase(p, cursor - p);
      cursor = p;
    } else if (c == 12) {  // Ctrl+L
      Write("\033[H\033[2J");
    } else if (c == 27) {  // escape sequences: arrows, Home/End, Delete
      char a = 0, b = 0;
      if (!ReadByte(&a) || !ReadByte(&b)) return Result::kEof;
      if (a == '[' && b >= '0' && b <= '9') {
        char t = 0;
        if (!ReadByte(&t)) return Result::kEof;
        if (t == '~' && b == '3' && cursor < buffer.size()) {
          buffer.erase(cursor, next(cursor) - cursor);
        } else if (t == '~' && (b == '1' || b == '7')) {
          cursor = 0;
        } else if (t == '~' && (b == '4' || b == '8')) {
          cursor = buffer.size();
        }
      } else if (a == '[' || a == 'O') {
        if (b == 'D' && cursor > 0) cursor = prev(cursor);
        if (b == 'C' && cursor < buffer.size()) cursor = next(cursor);
        if (b == 'H') cursor = 0;
        if (b == 'F') cursor = buffer.size();
        if (b == 'A' && hist > 0) browse(hist - 1);
        if (b == 'B' && hist < history_.size()) browse(hist + 1);
      }
    } else if (u >= 32 || c == '\t') {
      buffer.insert(cursor, 1, c);
      ++cursor;
      // Finish a multi-byte character before redrawing, so it is never drawn in halves.
      if (u >= 0xC0) {
        const int more = u >= 0xF0 ? 3 : u >= 0xE0 ? 2 : 1;
        for (int i = 0; i < more; ++i) {
          char k = 0;
          if (!ReadByte(&k)) return Result::kEof;
          buffer.insert(cursor, 1, k);
          ++cursor;
        }
      }
    }
    Redraw(prompt, buffer, cursor);
  }
}

}  // namespace flashkv::cli
