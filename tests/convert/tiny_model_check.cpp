// Integration check (ctest label `integration`) of `flashkv make-tiny` with the real
// tokenizer: two runs with one seed give identical files; the file loads, has DeepSeek V4's
// 129280-id vocabulary with the chat markers, and the engine runs it to finite, varied
// logits (the random weights keep activations unit-sized).
//
//   tiny_model_check FLASHKV_BIN WORK_DIR
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FLASHKV_BIN WORK_DIR\n", argv[0]);
    return 2;
  }
  const std::string bin = argv[1], work = argv[2];
  std::filesystem::create_directories(work);
  const std::string a = work + "/tiny-a.gguf", b = work + "/tiny-b.gguf";
  for (const std::string& out : {a, b}) {
    std::string cmd = "'" + bin + "' make-tiny '" + out + "' --seed 0";
    std::fprintf(stderr, "+ %s\n", cmd.c_str());
    if (std::system(cmd.c_str()) != 0) return Fail("make-tiny failed");
  }
  const std::string bytes = ReadAll(a);
  if (bytes.empty() || bytes != ReadAll(b)) return Fail("two runs with seed 0 differ");

  auto g = flashkv::GgufFile::Open(a);
  if (!g.ok()) return Fail(g.status().ToString());
  auto tokens = g->GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok() || tokens->size() != 129280) return Fail("vocabulary is not 129280 ids");
  std::set<std::string> have(tokens->begin(), tokens->end());
  for (const char* m : {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>",
                        "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜"})
    if (!have.count(m)) return Fail(std::string("missing chat marker ") + m);
  if ((*tokens)[128815] != "<think>") return Fail("<think> is not id 128815");
  if (g->tensors().size() != 178) return Fail("expected 178 tensors");

  // 48 ordinary ids: crosses the 32-token window, makes HCA-16 and CSA rows, and turns the
  // indexer's top-8 selection on.
  std::string ids;
  for (int i = 0; i < 48; ++i) {
    if (i) ids += ',';
    ids += std::to_string(1000 + 37 * i);
  }
  const std::string logits = work + "/tiny-logits.f32";
  std::string cmd = "'" + bin + "' logits -m '" + a + "' --tokens " + ids + " -o '" + logits + "'";
  std::fprintf(stderr, "+ %s\n", cmd.c_str());
  if (std::system(cmd.c_str()) != 0) return Fail("flashkv logits failed on the tiny model");
  const std::string raw = ReadAll(logits);
  const size_t n_vocab = 129280;
  if (raw.size() != 48 * n_vocab * 4) return Fail("unexpected logits size");
  std::vector<float> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), raw.size());
  std::set<size_t> argmaxes;
  double min_sd = 1e30, max_sd = 0;
  for (size_t p = 0; p < 48; ++p) {
    const float* row = v.data() + p * n_vocab;
    double s = 0, s2 = 0;
    size_t best = 0;
    for (size_t i = 0; i < n_vocab; ++i) {
      if (!std::isfinite(row[i])) return Fail("non-finite logit");
      s += row[i];
      s2 += double(row[i]) * row[i];
      if (row[i] > row[best]) best = i;
    }
    const double mean = s / n_vocab, sd = std::sqrt(s2 / n_vocab - mean * mean);
    min_sd = std::min(min_sd, sd);
    max_sd = std::max(max_sd, sd);
    argmaxes.insert(best);
  }
  std::printf(
      "make-tiny: %zu bytes, deterministic; logits sd per position in [%.3g, %.3g], %zu "
      "distinct argmax over 48 positions\n",
      bytes.size(), min_sd, max_sd, argmaxes.size());
  if (min_sd < 0.05 || max_sd > 50) return Fail("logit scale is degenerate");
  if (argmaxes.size() < 8) return Fail("logits barely depend on the input");
  return 0;
}
