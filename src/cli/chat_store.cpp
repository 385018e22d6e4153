#include "cli/chat_store.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace flashkv::cli {
namespace {

constexpr const char* kSuffix = ".chat.json";

const char* RoleName(ChatRole r) {
  return r == ChatRole::kAssistant ? "assistant" : r == ChatRole::kSystem ? "system" : "user";
}

}  // namespace

Status ChatStore::CheckName(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return InvalidArgument("a chat name has 1 to 64 characters");
  if (name[0] == '.') return InvalidArgument("a chat name must not start with '.'");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) {
      return InvalidArgument("a chat name may hold letters, digits, '-', '_' and '.', not '{}'",
                             std::string(1, c));
    }
  }
  return Status::Ok();
}

std::string ChatStore::PathFor(const std::string& name) const {
  return (std::filesystem::path(dir_) / (name + kSuffix)).string();
}

Status ChatStore::Save(const std::string& name, const SavedChat& chat) const {
  FLASHKV_RETURN_IF_ERROR(CheckName(name));
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return IoError("cannot create {}: {}", dir_, ec.message());
  nlohmann::ordered_json j;
  j["version"] = 1;
  j["system"] = chat.system;
  j["think"] = chat.think;
  j["messages"] = nlohmann::ordered_json::array();
  for (const ChatMessage& m : chat.messages) {
    j["messages"].push_back({{"role", RoleName(m.role)}, {"content", m.content}});
  }
  // Written beside and renamed, so a crash never leaves half a file under the name.
  const std::string path = PathFor(name);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump(1) << '\n';
    if (!out) return IoError("cannot write {}", tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return IoError("cannot rename {} to {}: {}", tmp, path, ec.message());
  return Status::Ok();
}

Expected<SavedChat> ChatStore::Load(const std::string& name) const {
  FLASHKV_RETURN_IF_ERROR(CheckName(name));
  const std::string path = PathFor(name);
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("no saved chat '{}' (/list shows them)", name);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array()) {
    return InvalidArgument("{} is not a saved chat", path);
  }
  SavedChat chat;
  if (j.contains("system") && j["system"].is_string()) chat.system = j["system"];
  if (j.contains("think") && j["think"].is_boolean()) chat.think = j["think"];
  for (const auto& m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return InvalidArgument("{}: a message without a role or content", path);
    }
    ChatMessage msg;
    const std::string role = m["role"];
    if (role == "user") {
      msg.role = ChatRole::kUser;
    } else if (role == "assistant") {
      msg.role = ChatRole::kAssistant;
    } else {
      return InvalidArgument("{}: unknown role '{}'", path, role);
    }
    msg.content = m["content"];
    chat.messages.push_back(std::move(msg));
  }
  return chat;
}

Expected<std::vector<std::string>> ChatStore::List() const {
  std::vector<std::string> names;
  std::error_code ec;
  if (!std::filesystem::exists(dir_, ec)) return names;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string file = e.path().filename().string();
    const std::string suffix = kSuffix;
    if (file.size() > suffix.size() && file.ends_with(suffix)) {
      names.push_back(file.substr(0, file.size() - suffix.size()));
    }
  }
  if (ec) return IoError("cannot list {}: {}", dir_, ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace flashkv::cli
