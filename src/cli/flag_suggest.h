// "Did you mean": the flags a command line names that its (sub)command does not know, each
// with the closest known spelling, for the error CLI11 prints ("The following arguments
// were not expected"), which names no alternative. Must not: parse values or run commands.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace flashkv::cli {

// The closest of `known` to `unknown` (edit distance at most a third of its length, at
// least 2; or `unknown` is a prefix of exactly one), or "" when none is close.
std::string ClosestFlag(std::string_view unknown, const std::vector<std::string>& known);

// Every flag spelling of `app` and of the apps above it ("--ctx", "-c", ...).
std::vector<std::string> KnownFlags(const CLI::App& app);

// For each argument in args[1..] that looks like a flag ("-x", "--name", "--name=value")
// and that the deepest subcommand `args` selects does not know: a line
// "unknown flag --ctx-sze for `flashkv serve`; did you mean --ctx-size?" (without the
// suggestion when none is close). Empty when every flag is known.
std::vector<std::string> UnknownFlagHints(const CLI::App& root,
                                          const std::vector<std::string>& args);

}  // namespace flashkv::cli
