#include "tokenizer/token_id_list.h"

#include <charconv>

namespace flashkv {

Expected<std::vector<int32_t>> ParseTokenIdList(std::string_view text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  auto skip_separators = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' ||
                               text[i] == '\r' || text[i] == ',')) {
      ++i;
    }
  };
  skip_separators();
  bool bracket = i < text.size() && text[i] == '[';
  if (bracket) ++i;
  while (true) {
    skip_separators();
    if (i >= text.size()) break;
    if (bracket && text[i] == ']') {
      ++i;
      skip_separators();
      if (i < text.size()) {
        return InvalidArgument("unexpected text after ']' at byte {}: \"{}\"", i,
                               text.substr(i, 16));
      }
      return ids;
    }
    int32_t v = 0;
    auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), v);
    if (ec != std::errc() || end == text.data() + i) {
      return InvalidArgument("not a token id at byte {}: \"{}\"", i, text.substr(i, 16));
    }
    i = static_cast<size_t>(end - text.data());
    if (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n' &&
        text[i] != '\r' && text[i] != ',' && text[i] != ']') {
      return InvalidArgument("not a token id at byte {}: \"{}\"", i, text.substr(i, 16));
    }
    ids.push_back(v);
  }
  if (bracket) return InvalidArgument("missing ']' at the end of the id list");
  return ids;
}

std::string FormatTokenIdList(std::span<const int32_t> ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  return out;
}

}  // namespace flashkv
