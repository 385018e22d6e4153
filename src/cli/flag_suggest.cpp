#include "cli/flag_suggest.h"

#include <fmt/format.h>
#include <algorithm>

namespace flashkv::cli {
namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The selected subcommand chain: the deepest subcommand whose name appears, in order,
// among the non-flag arguments.
const CLI::App* SelectedCommand(const CLI::App& root, const std::vector<std::string>& args) {
  const CLI::App* app = &root;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i].starts_with("-")) continue;
    for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->check_name(args[i])) {
        app = sub;
        break;
      }
    }
  }
  return app;
}

}  // namespace

std::string ClosestFlag(std::string_view unknown, const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, unknown.size() / 3) + 1;
  std::vector<std::string> prefixed;
  for (const std::string& k : known) {
    const size_t d = EditDistance(unknown, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
    if (unknown.size() >= 4 && k.starts_with(unknown)) prefixed.push_back(k);
  }
  if (best.empty() && prefixed.size() == 1) best = prefixed[0];
  return best;
}

std::vector<std::string> KnownFlags(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* o : a->get_options([](const CLI::Option*) { return true; })) {
      for (const std::string& s : o->get_snames()) out.push_back("-" + s);
      for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
    }
  }
  return out;
}

std::vector<std::string> UnknownFlagHints(const CLI::App& root,
                                          const std::vector<std::string>& args) {
  const CLI::App* cmd = SelectedCommand(root, args);
  const std::vector<std::string> known = KnownFlags(*cmd);
  std::string path = "flashkv";
  std::vector<std::string> names;
  for (const CLI::App* a = cmd; a != nullptr && a->get_parent() != nullptr; a = a->get_parent()) {
    names.push_back(a->get_name());
  }
  for (auto it = names.rbegin(); it != names.rend(); ++it) path += " " + *it;
  std::vector<std::string> hints;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) continue;
    const std::string flag = arg.substr(0, arg.find('='));
    if (std::find(known.begin(), known.end(), flag) != known.end()) continue;
    const std::string close = ClosestFlag(flag, known);
    hints.push_back(
        close.empty()
            ? fmt::format("unknown flag {} for `{}` (see {} --help)", flag, path, path)
            : fmt::format("unknown flag {} for `{}`; did you mean {}?", flag, path, close));
  }
  return hints;
}

}  // namespace flashkv::cli
