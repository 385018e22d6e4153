// LineEditor: the prompt line of `flashkv chat` — a small raw-mode editor (cursor keys,
// Home/End, Ctrl+A/E/U/K/W, Backspace/Delete, Up/Down through a history kept in a file) on a
// terminal, and plain line reads when stdin is not one (pipes, tests). Exists because the
// Debian line-editing libraries are GPL (readline) or not installed by default (libedit),
// and a chat needs only this much. Must not: know the chat (commands, models).
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace flashkv::cli {

class LineEditor {
 public:
  enum class Result { kLine, kInterrupt, kEof };

  // `history_file`: where history is loaded from and appended to ("" keeps it in memory).
  explicit LineEditor(std::string history_file = "");
  ~LineEditor();

  // Reads one line after `prompt`. kInterrupt: Ctrl+C (the line is discarded); kEof:
  // Ctrl+D on an empty line, or the end of a piped stdin.
  Result ReadLine(const std::string& prompt, std::string* line);
  // Adds a non-empty line that differs from the last one to the history (and its file).
  void AddHistory(const std::string& line);

  bool interactive() const { return tty_; }

  // A SIGINT handler's flag and the read end of a pipe it writes a byte to: a signal at
  // the prompt (a Ctrl+C typed in the moment before raw mode, `kill -INT`) reads as a
  // Ctrl+C typed there, so it is never lost and never ends the process with status 130.
  void SetInterrupt(std::atomic<bool>* flag, int wake_fd) {
    interrupt_ = flag;
    wake_fd_ = wake_fd;
  }

 private:
  Result ReadRaw(const std::string& prompt, std::string* line);
  // One byte of input; a pending interrupt reads as Ctrl+C (3). False: end of input.
  bool ReadByte(char* c) const;
  bool TakeInterrupt() const { return interrupt_ != nullptr && interrupt_->exchange(false); }
  void Redraw(const std::string& prompt, const std::string& buffer, size_t cursor) const;

  std::string history_file_;
  std::vector<std::string> history_;
  bool tty_ = false;
  std::atomic<bool>* interrupt_ = nullptr;
  int wake_fd_ = -1;
};

}  // namespace flashkv::cli
