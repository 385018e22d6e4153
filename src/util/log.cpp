#include "util/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace flashkv {

void InitLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("flashkv");
  logger->set_pattern("%m%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") lvl = spdlog::level::info;
  spdlog::set_level(lvl);
}

}  // namespace flashkv
