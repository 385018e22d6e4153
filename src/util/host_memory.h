// How much host memory the machine has and can still give: its physical memory (the bound
// a computed allocation size is checked against, util/memory_budget.h) and MemAvailable
// of /proc/meminfo (what the kernel estimates can be allocated without swapping), for
// defaults that size a cache tier from the machine rather than a fixed number. Must not:
// allocate or pin anything.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace flashkv {

// Physical memory in bytes (sysconf), 0 when unknown.
uint64_t PhysicalHostMemory();

// MemAvailable in bytes; kUnsupported where /proc/meminfo lacks it (non-Linux).
Expected<uint64_t> AvailableHostMemory();
// The same, parsed from the text of a /proc/meminfo (for tests).
Expected<uint64_t> ParseMemAvailable(std::string_view meminfo);

// Whether `path` lies on a filesystem kept in memory (tmpfs, ramfs: /dev/shm): its pages are
// shared memory, which MemAvailable already leaves out, where a disk file's cached pages
// count as available even while pinned (model/expert_cache.h pins the routed experts').
bool OnMemoryFilesystem(const std::string& path);

}  // namespace flashkv
