#include "util/host_memory.h"

#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace flashkv {

uint64_t PhysicalHostMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return uint64_t(pages) * uint64_t(page);
}

Expected<uint64_t> ParseMemAvailable(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  const size_t at = meminfo.find(kKey);
  if (at == std::string_view::npos) return Unsupported("/proc/meminfo has no MemAvailable");
  std::string_view rest = meminfo.substr(at + kKey.size());
  const size_t digits = rest.find_first_not_of(' ');
  if (digits == std::string_view::npos) return Corrupt("MemAvailable has no value");
  rest = rest.substr(digits);
  uint64_t kib = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
  if (ec != std::errc() || end == rest.data()) return Corrupt("MemAvailable is not a number");
  if (!std::string_view(end, size_t(rest.data() + rest.size() - end)).starts_with(" kB")) {
    return Corrupt("MemAvailable is not in kB");
  }
  if (kib > (UINT64_MAX >> 10)) return Corrupt("MemAvailable is out of range");
  return kib << 10;
}

Expected<uint64_t> AvailableHostMemory() {
  std::ifstream in("/proc/meminfo");
  if (!in) return IoError("cannot read /proc/meminfo");
  std::stringstream text;
  text << in.rdbuf();
  return ParseMemAvailable(text.str());
}

bool OnMemoryFilesystem(const std::string& path) {
  struct statfs st {};
  if (statfs(path.c_str(), &st) != 0) return false;
  return st.f_type == TMPFS_MAGIC || st.f_type == RAMFS_MAGIC;
}

}  // namespace flashkv
