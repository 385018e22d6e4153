// Helpers shared by the cli tests: the ds4-tiny fixture, CLI11 parsing of an argv, and a
// scoped working directory (DefaultModelPath looks in the current directory).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace flashkv::testing {

inline std::string Ds4TinyPath() {
  return std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
}

// Parses `args` (without the program name) with `app`; false and a message on error.
inline bool Parse(CLI::App& app, std::vector<std::string> args, std::string* error) {
  std::vector<const char*> argv{"flashkv"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    *error = e.what();
    return false;
  }
  return true;
}

// A fresh empty directory that is the working directory for the object's lifetime.
class ScopedWorkDir {
 public:
  explicit ScopedWorkDir(const std::string& name)
      : old_(std::filesystem::current_path()),
        dir_(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::filesystem::current_path(dir_);
  }
  ~ScopedWorkDir() {
    std::filesystem::current_path(old_);
    std::filesystem::remove_all(dir_);
  }
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path old_;
  std::filesystem::path dir_;
};

}  // namespace flashkv::testing
