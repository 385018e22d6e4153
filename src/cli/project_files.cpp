#include "cli/project_files.h"

#include <filesystem>

namespace flashkv::cli {

Expected<std::string> FindProjectFile(const std::string& relative) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(relative, ec)) return relative;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
         dir = dir.parent_path()) {
      fs::path candidate = dir / relative;
      if (fs::exists(candidate, ec)) return candidate.string();
      // An installed flashkv (cmake --install): <prefix>/bin/flashkv finds
      // <prefix>/share/flashkv/<relative>.
      candidate = dir / "share" / "flashkv" / relative;
      if (fs::exists(candidate, ec)) return candidate.string();
    }
  }
  return NotFound("{} not found in the working directory or above the flashkv executable",
                  relative);
}

std::string DefaultModelPath() {
  std::error_code ec;
  if (std::filesystem::exists("ds4flash.gguf", ec)) return "ds4flash.gguf";
  auto tiny = FindProjectFile("models/flashkv-tiny.gguf");
  return tiny.ok() ? *tiny : std::string("models/flashkv-tiny.gguf");
}

Expected<std::string> ResolveModelPath(const std::string& flag) {
  std::string path = flag.empty() ? DefaultModelPath() : flag;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return NotFound("model {} not found (make one with `flashkv make-tiny {}`, or pass --model)",
                    path, path);
  }
  return path;
}

}  // namespace flashkv::cli
