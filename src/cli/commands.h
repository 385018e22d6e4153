// Registration of the flashkv subcommands. Each lives in cmd_<name>.cpp, parses its own
// flags, calls the library and prints. A file registers itself with a file-scope
//   FLASHKV_REGISTER_COMMAND(order, RegisterFoo);
// so adding a subcommand never edits main.cpp. A failing command calls Fail(), which
// throws CLI::RuntimeError(code) from its callback so main() returns that exit code.
#pragma once

#include <CLI/CLI.hpp>

#include "util/status.h"

namespace flashkv::cli {

using RegisterFn = void (*)(CLI::App& app);

// `order` sorts the subcommands in --help (lower first).
struct CommandRegistrar {
  CommandRegistrar(int order, RegisterFn fn);
};

// Calls every registered function in order.
void RegisterAllCommands(CLI::App& app);

// Prints "flashkv <command>: <status>" to stderr and throws CLI::RuntimeError(exit_code).
[[noreturn]] void Fail(const char* command, const Status& status, int exit_code = 1);

}  // namespace flashkv::cli

#define FLASHKV_REGISTER_COMMAND(order, fn) \
  static ::flashkv::cli::CommandRegistrar FLASHKV_CONCAT(_fkv_cmd_, __LINE__)(order, fn)
