#include "chat/dsml_lex.h"

namespace flashkv::dsml_lex {

std::string Cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out.append(part);
  return out;
}

size_t TagEnd(std::string_view text, size_t pos, size_t max_bytes) {
  if (pos >= text.size()) return std::string_view::npos;
  const size_t limit = max_bytes >= text.size() - pos ? text.size() : pos + max_bytes;
  bool quoted = false;
  for (size_t i = pos + 1; i < limit; ++i) {
    if (text[i] == '"') quoted = !quoted;
    if (text[i] == '>' && !quoted) return i;
  }
  return std::string_view::npos;
}

std::optional<std::string_view> RawAttribute(std::string_view tag, std::string_view key) {
  const std::string needle = Cat({key, "=\""});
  size_t at = 0;
  while ((at = tag.find(needle, at)) != std::string_view::npos) {
    if (at > 0 && IsSpace(tag[at - 1])) {
      const size_t start = at + needle.size();
      const size_t end = tag.find('"', start);
      if (end == std::string_view::npos) return std::nullopt;
      return tag.substr(start, end - start);
    }
    at += needle.size();
  }
  return std::nullopt;
}

}  // namespace flashkv::dsml_lex
