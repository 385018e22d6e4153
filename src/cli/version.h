// What `flashkv --version` prints: the release, the git commit the binary was built from and
// the build options that change what it can do (CUDA and its architectures), so a bug
// report names the exact build. Must not: probe the machine (that is the backend's log).
#pragma once

#include <string>

namespace flashkv::cli {

// e.g. "flashkv 0.1.0 (commit a48f6fe1c2d3, Release, CUDA on: sm 90, GNU 12.2.0)".
std::string VersionText();

}  // namespace flashkv::cli
