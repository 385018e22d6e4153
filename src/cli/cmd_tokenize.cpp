// `flashkv tokenize` and `flashkv detokenize`: text ↔ token ids with a model's vocabulary.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/project_files.h"
#include "gguf/gguf_file.h"
#include "tokenizer/token_id_list.h"
#include "tokenizer/tokenizer.h"

namespace flashkv::cli {
namespace {

// DeepSeek V4 Flash's vocab_size: where AddMissingChatMarkers may place the V4 markers
// when the vocabulary comes from the V3 tokenizer.json instead of a model file.
constexpr size_t kDs4VocabSize = 129280;

struct TokenizerSource {
  std::string model;
  std::string tokenizer_json;
};

void AddSourceOptions(CLI::App* cmd, TokenizerSource* src) {
  cmd->add_option("--model,-m", src->model,
                  "GGUF whose tokenizer.ggml.* vocabulary to use (default ./ds4flash.gguf if "
                  "present, else models/flashkv-tiny.gguf)");
  cmd->add_option("--tokenizer-json", src->tokenizer_json,
                  "use an HF tokenizer.json (plus the V4 chat markers) instead of a GGUF")
      ->excludes(cmd->get_option("--model"));
}

Expected<Tokenizer> LoadTokenizer(const TokenizerSource& src) {
  if (!src.tokenizer_json.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(Vocab vocab, LoadVocabFromTokenizerJson(src.tokenizer_json));
    FLASHKV_RETURN_IF_ERROR(AddMissingChatMarkers(vocab, std::max(vocab.size(), kDs4VocabSize)));
    return Tokenizer::FromVocab(vocab);
  }
  FLASHKV_ASSIGN_OR_RETURN(std::string path, ResolveModelPath(src.model));
  FLASHKV_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(path));
  Expected<Tokenizer> tok = Tokenizer::FromGguf(gguf);
  if (!tok.ok()) return tok.status().WithContext(path);
  return tok;
}

Expected<std::string> ReadInput(const std::string& text, bool text_given, const std::string& file) {
  if (text_given) return text;
  std::stringstream ss;
  if (!file.empty() && file != "-") {
    std::ifstream in(file, std::ios::binary);
    if (!in) return IoError("cannot open {}", file);
    ss << in.rdbuf();
    if (in.bad()) return IoError("cannot read {}", file);
  } else {
    ss << std::cin.rdbuf();
  }
  return ss.str();
}

void RegisterTokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  auto src = std::make_shared<TokenizerSource>();
  auto text = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  auto specials = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  AddSourceOptions(cmd, src.get());
  auto* text_opt = cmd->add_option("--text,-t", *text, "the text (default: read --file or stdin)");
  cmd->add_option("--file,-f", *file, "read the text from this file ('-' = stdin)")
      ->excludes(text_opt);
  cmd->add_flag("--specials", *specials,
                "recognise special-token text such as <｜User｜> as single ids");
  cmd->add_flag("--json", *json, "print {\"count\", \"ids\", \"pieces\"} as JSON");
  cmd->callback([=] {
    Expected<Tokenizer> tok = LoadTokenizer(*src);
    if (!tok.ok()) Fail("tokenize", tok.status());
    Expected<std::string> input = ReadInput(*text, text_opt->count() > 0, *file);
    if (!input.ok()) Fail("tokenize", input.status());
    std::vector<int32_t> ids = tok->Encode(*input, *specials);
    if (*json) {
      nlohmann::json out;
      out["count"] = ids.size();
      out["ids"] = ids;
      nlohmann::json pieces = nlohmann::json::array();
      for (int32_t id : ids) pieces.push_back(std::string(tok->TokenPiece(id)));
      out["pieces"] = std::move(pieces);
      std::printf("%s\n",
                  out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("%s\n", FormatTokenIdList(ids).c_str());
    }
  });
}

void RegisterDetokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("detokenize", "Print the text of token ids (exact bytes)");
  auto src = std::make_shared<TokenizerSource>();
  auto ids_text = std::make_shared<std::vector<std::string>>();
  auto file = std::make_shared<std::string>();
  AddSourceOptions(cmd, src.get());
  auto* ids_opt = cmd->add_option(
      "ids", *ids_text,
      "token ids: \"1 2 3\", \"1,2,3\" or \"[1, 2, 3]\" (default: --file or stdin)");
  cmd->add_option("--file,-f", *file, "read the ids from this file ('-' = stdin)")
      ->excludes(ids_opt);
  cmd->callback([=] {
    Expected<Tokenizer> tok = LoadTokenizer(*src);
    if (!tok.ok()) Fail("detokenize", tok.status());
    std::string joined;
    for (const std::string& s : *ids_text) joined += s + " ";
    Expected<std::string> input = ReadInput(joined, ids_opt->count() > 0, *file);
    if (!input.ok()) Fail("detokenize", input.status());
    Expected<std::vector<int32_t>> ids = ParseTokenIdList(*input);
    if (!ids.ok()) Fail("detokenize", ids.status());
    Expected<std::string> bytes = tok->Decode(*ids);
    if (!bytes.ok()) Fail("detokenize", bytes.status());
    std::fwrite(bytes->data(), 1, bytes->size(), stdout);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(60, RegisterTokenize);
FLASHKV_REGISTER_COMMAND(61, RegisterDetokenize);

}  // namespace flashkv::cli
