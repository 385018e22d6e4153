#include "tokenizer/vocab.h"

#include <fstream>
#include <sstream>
#include <string_view>
#include <tuple>
#include <unordered_set>

#include <nlohmann/json.hpp>

namespace flashkv {
namespace {

bool StartsWith(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// llama.cpp's converter marks these as control tokens even when tokenizer.json says
// "special": false (DeepSeek's <｜User｜> etc.), so real DS4 GGUFs have them as type 3.
bool LooksLikeMarker(std::string_view text) {
  return (StartsWith(text, "<|") && EndsWith(text, "|>")) ||
         (StartsWith(text, "<｜") && EndsWith(text, "｜>"));
}

constexpr const char* kGgufTokens = "tokenizer.ggml.tokens";
constexpr const char* kGgufTokenType = "tokenizer.ggml.token_type";
constexpr const char* kGgufMerges = "tokenizer.ggml.merges";
constexpr const char* kGgufBos = "tokenizer.ggml.bos_token_id";
constexpr const char* kGgufEos = "tokenizer.ggml.eos_token_id";

std::string PadText(size_t id) {
  return "[PAD" + std::to_string(id) + "]";
}

int32_t FindByText(const Vocab& vocab, std::string_view text) {
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    if (vocab.tokens[i] == text) return static_cast<int32_t>(i);
  }
  return -1;
}

Expected<Vocab> ParseTokenizerJson(const nlohmann::json& root, const std::string& path) {
  if (!root.contains("model") || !root["model"].is_object()) {
    return Corrupt("{}: no \"model\" object", path);
  }
  const auto& model = root["model"];
  if (model.value("type", std::string()) != "BPE") {
    return Unsupported("{}: model.type is \"{}\", flashkv reads only BPE", path,
                       model.value("type", std::string()));
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return Corrupt("{}: model.vocab is missing or not an object", path);
  }

  // Collect (id, text, type) from the BPE vocabulary and the added tokens.
  std::vector<std::pair<int64_t, std::pair<std::string, TokenType>>> entries;
  entries.reserve(model["vocab"].size() + 1024);
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) return Corrupt("{}: model.vocab[\"{}\"] is not an id", path, text);
    entries.push_back({id.get<int64_t>(), {text, TokenType::kNormal}});
  }
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const auto& added : root["added_tokens"]) {
      if (!added.contains("id") || !added["id"].is_number_integer() || !added.contains("content") ||
          !added["content"].is_string()) {
        return Corrupt("{}: an added_tokens entry lacks an integer id or a string content", path);
      }
      std::string text = added["content"].get<std::string>();
      bool special = added.value("special", false) || LooksLikeMarker(text);
      entries.push_back(
          {added["id"].get<int64_t>(),
           {std::move(text), special ? TokenType::kControl : TokenType::kUserDefined}});
    }
  }

  int64_t max_id = -1;
  for (const auto& e : entries) {
    if (e.first < 0 || e.first > (int64_t{1} << 24)) {
      return Corrupt("{}: token \"{}\" has id {} outside [0, 2^24]", path, e.second.first, e.first);
    }
    max_id = std::max(max_id, e.first);
  }
  Vocab vocab;
  vocab.tokens.assign(static_cast<size_t>(max_id + 1), std::string());
  vocab.token_types.assign(static_cast<size_t>(max_id + 1),
                           static_cast<int32_t>(TokenType::kUnused));
  std::vector<bool> seen(static_cast<size_t>(max_id + 1), false);
  for (auto& [id, tt] : entries) {
    size_t i = static_cast<size_t>(id);
    if (seen[i]) {
      // An added token may repeat a BPE vocab entry with the same text; anything else is
      // two tokens claiming one id.
      if (vocab.tokens[i] != tt.first) {
        return Corrupt("{}: id {} is both \"{}\" and \"{}\"", path, id, vocab.tokens[i], tt.first);
      }
      if (tt.second != TokenType::kNormal) vocab.token_types[i] = static_cast<int32_t>(tt.second);
      continue;
    }
    seen[i] = true;
    vocab.tokens[i] = std::move(tt.first);
    vocab.token_types[i] = static_cast<int32_t>(tt.second);
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) vocab.tokens[i] = PadText(i);
  }

  if (model.contains("merges") && model["merges"].is_array()) {
    vocab.merges.reserve(model["merges"].size());
    for (const auto& m : model["merges"]) {
      if (m.is_string()) {
        vocab.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        vocab.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      } else {
        return Corrupt("{}: merge #{} is neither \"a b\" nor [a, b]", path, vocab.merges.size());
      }
    }
  }
  vocab.bos_id = FindByText(vocab, kBosText);
  vocab.eos_id = FindByText(vocab, kEosText);
  return vocab;
}

}  // namespace

Expected<Vocab> LoadVocabFromTokenizerJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open tokenizer file {}", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return IoError("cannot read tokenizer file {}", path);
  nlohmann::json root = nlohmann::json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Corrupt("{}: not valid JSON", path);
  Expected<Vocab> vocab = ParseTokenizerJson(root, path);
  if (!vocab.ok()) return vocab;
  FLASHKV_RETURN_IF_ERROR(ValidateVocab(*vocab).WithContext(path));
  return vocab;
}

Status AddMissingChatMarkers(Vocab& vocab, size_t n_vocab) {
  std::vector<std::string> missing;
  {
    std::unordered_set<std::string_view> present(vocab.tokens.begin(), vocab.tokens.end());
    for (const char* marker : kChatMarkerTexts) {
      if (!present.count(marker)) missing.emplace_back(marker);
    }
  }
  if (vocab.tokens.size() > n_vocab) {
    return InvalidArgument("vocabulary has {} tokens, more than n_vocab {}", vocab.tokens.size(),
                           n_vocab);
  }
  while (vocab.tokens.size() < n_vocab) {
    vocab.tokens.push_back(PadText(vocab.tokens.size()));
    vocab.token_types.push_back(static_cast<int32_t>(TokenType::kUnused));
  }
  // Markers take the first unused ids, in kChatMarkerTexts order, so the result is
  // deterministic for a given tokenizer.json and n_vocab.
  size_t next = 0;
  for (const std::string& marker : missing) {
    while (next < vocab.tokens.size() &&
           vocab.token_types[next] != static_cast<int32_t>(TokenType::kUnused)) {
      ++next;
    }
    if (next >= vocab.tokens.size()) {
      return ResourceExhausted("no unused id below n_vocab {} left for chat marker \"{}\"", n_vocab,
                               marker);
    }
    vocab.tokens[next] = marker;
    vocab.token_types[next] = static_cast<int32_t>(TokenType::kControl);
    ++next;
  }
  if (vocab.bos_id < 0) vocab.bos_id = FindByText(vocab, kBosText);
  if (vocab.eos_id < 0) vocab.eos_id = FindByText(vocab, kEosText);
  return Status::Ok();
}

Expected<Vocab> LoadVocabFromGguf(const GgufFile& gguf) {
  Vocab vocab;
  FLASHKV_ASSIGN_OR_RETURN(vocab.tokens, gguf.GetStringArray(kGgufTokens));
  if (gguf.Has(kGgufTokenType)) {
    FLASHKV_ASSIGN_OR_RETURN(std::vector<int64_t> types, gguf.GetIntArray(kGgufTokenType));
    if (types.size() != vocab.tokens.size()) {
      return Corrupt("{} has {} entries but {} has {}", kGgufTokenType, types.size(), kGgufTokens,
                     vocab.tokens.size());
    }
    vocab.token_types.reserve(types.size());
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] < static_cast<int64_t>(TokenType::kNormal) ||
          types[i] > static_cast<int64_t>(TokenType::kByte)) {
        return Corrupt("{}[{}] = {} is not a GGML token type", kGgufTokenType, i, types[i]);
      }
      vocab.token_types.push_back(static_cast<int32_t>(types[i]));
    }
  } else {
    for (const std::string& t : vocab.tokens) {
      bool marker = LooksLikeMarker(t) || t == "<think>" || t == "</think>" || t == "｜DSML｜";
      vocab.token_types.push_back(
          static_cast<int32_t>(marker ? TokenType::kControl : TokenType::kNormal));
    }
  }
  if (gguf.Has(kGgufMerges)) {
    FLASHKV_ASSIGN_OR_RETURN(vocab.merges, gguf.GetStringArray(kGgufMerges));
  }
  const auto n = static_cast<uint64_t>(vocab.tokens.size());
  for (auto [key, out, text] : {std::tuple{kGgufBos, &vocab.bos_id, kBosText},
                                std::tuple{kGgufEos, &vocab.eos_id, kEosText}}) {
    if (gguf.Has(key)) {
      FLASHKV_ASSIGN_OR_RETURN(uint64_t id, gguf.GetU64(key));
      if (id >= n) return Corrupt("{} = {} is outside the vocabulary of {}", key, id, n);
      *out = static_cast<int32_t>(id);
    } else {
      *out = FindByText(vocab, text);
    }
  }
  FLASHKV_RETURN_IF_ERROR(ValidateVocab(vocab));
  return vocab;
}

void WriteVocabToGguf(const Vocab& vocab, GgufWriter& writer) {
  writer.SetString("tokenizer.ggml.model", "gpt2");
  writer.SetString("tokenizer.ggml.pre", "joyai-llm");
  writer.SetStringArray(kGgufTokens, vocab.tokens);
  writer.SetI32Array(kGgufTokenType, vocab.token_types);
  writer.SetStringArray(kGgufMerges, vocab.merges);
  if (vocab.bos_id >= 0) writer.SetU32(kGgufBos, static_cast<uint32_t>(vocab.bos_id));
  if (vocab.eos_id >= 0) writer.SetU32(kGgufEos, static_cast<uint32_t>(vocab.eos_id));
}

Status ValidateVocab(const Vocab& vocab) {
  if (vocab.tokens.empty()) return Corrupt("vocabulary is empty");
  if (vocab.token_types.size() != vocab.tokens.size()) {
    return Corrupt("vocabulary has {} tokens but {} token types", vocab.tokens.size(),
                   vocab.token_types.size());
  }
  const auto n = static_cast<int64_t>(vocab.tokens.size());
  if (vocab.bos_id >= n || vocab.eos_id >= n) {
    return Corrupt("bos id {} / eos id {} outside the vocabulary of {}", vocab.bos_id, vocab.eos_id,
                   n);
  }
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    if (vocab.merges[i].find(' ') == std::string::npos) {
      return Corrupt("merge #{} \"{}\" has no space between its two parts", i, vocab.merges[i]);
    }
  }
  return Status::Ok();
}

}  // namespace flashkv
