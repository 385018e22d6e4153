// Test helper: a small synthetic HF tokenizer.json (BOS/EOS added tokens at 0 and 1, then
// single letters, then "w<i>" filler tokens, a few merges), so convert tests need not parse
// the 7.8 MB real one.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace flashkv::testing {

// `n` tokens in all. Ids: 0 BOS, 1 EOS, 2.. 27 "a".."z", 28 "ab", 29 "abc", then "w<i>"; the
// last token is "yz" so that the merge "y z" survives only when the whole vocab is kept.
inline void WriteMiniTokenizer(const std::filesystem::path& path, int n) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  vocab["<｜begin▁of▁sentence｜>"] = 0;
  vocab["<｜end▁of▁sentence｜>"] = 1;
  for (int c = 0; c < 26; ++c) vocab[std::string(1, static_cast<char>('a' + c))] = 2 + c;
  vocab["ab"] = 28;
  vocab["abc"] = 29;
  for (int i = 30; i < n - 1; ++i) vocab[fmt::format("w{}", i)] = i;
  vocab["yz"] = n - 1;
  nlohmann::ordered_json j;
  j["model"] = {
      {"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array({"a b", "ab c", "y z"})}};
  j["added_tokens"] =
      nlohmann::json::array({{{"id", 0}, {"content", "<｜begin▁of▁sentence｜>"}, {"special", true}},
                             {{"id", 1}, {"content", "<｜end▁of▁sentence｜>"}, {"special", true}}});
  std::ofstream(path) << j.dump();
}

}  // namespace flashkv::testing
