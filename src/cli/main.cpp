// The single flashkv binary: subcommands only, all logic lives in the libraries.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/flag_suggest.h"
#include "cli/version.h"
#include "util/log.h"
#include "util/status.h"

namespace flashkv::cli {
namespace {

std::vector<std::pair<int, RegisterFn>>& Registry() {
  static std::vector<std::pair<int, RegisterFn>> registry;
  return registry;
}

}  // namespace

CommandRegistrar::CommandRegistrar(int order, RegisterFn fn) {
  Registry().emplace_back(order, fn);
}

void RegisterAllCommands(CLI::App& app) {
  auto entries = Registry();
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [order, fn] : entries) fn(app);
}

void Fail(const char* command, const Status& status, int exit_code) {
  std::fprintf(stderr, "flashkv %s: %s\n", command, status.ToString().c_str());
  throw CLI::RuntimeError(exit_code);
}

}  // namespace flashkv::cli

int main(int argc, char** argv) {
  CLI::App app{"flashkv: DeepSeek V4 Flash inference with a disk-backed KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", flashkv::cli::VersionText());
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")
      ->capture_default_str();
  app.parse_complete_callback([&] { flashkv::InitLogging(log_level); });
  flashkv::cli::RegisterAllCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 says "The following arguments were not expected" (or takes a misspelt flag for
    // a positional); name the flag and its closest spelling first.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ||
        dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr ||
        dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
      const std::vector<std::string> args(argv, argv + argc);
      for (const std::string& hint : flashkv::cli::UnknownFlagHints(app, args)) {
        std::fprintf(stderr, "%s\n", hint.c_str());
      }
    }
    return app.exit(e);
  }
  return 0;
}
