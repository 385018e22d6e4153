// Logging: spdlog to stderr with one process-wide format. Call InitLogging once from
// main; library code just uses spdlog::info/warn/error.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

namespace flashkv {

// level: trace|debug|info|warn|error|off. Unknown names fall back to info.
void InitLogging(const std::string& level = "info");

}  // namespace flashkv
