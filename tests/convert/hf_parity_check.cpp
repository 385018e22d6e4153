// Integration check (ctest label `integration`): `flashkv convert` the hf-tiny-a checkpoint
// to an f32 GGUF, run `flashkv logits` on the reference prompt with HF numerics, and compare
// with the transformers logits (prefill_logits.f32 then decode_logits.f32) and greedy tokens.
//
//   hf_parity_check FLASHKV_BIN FIXTURE_DIR WORK_DIR TOLERANCE
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// Runs a shell command, returns its stdout; exits the check on failure.
std::string Run(const std::string& cmd) {
  std::fprintf(stderr, "+ %s\n", cmd.c_str());
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) std::exit(2);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (::pclose(p) != 0) {
    std::fprintf(stderr, "command failed: %s\n%s\n", cmd.c_str(), out.c_str());
    std::exit(1);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s FLASHKV_BIN FIXTURE_DIR WORK_DIR TOLERANCE\n", argv[0]);
    return 2;
  }
  const std::string bin = argv[1], fixture = argv[2], work = argv[3];
  const double tol = std::atof(argv[4]);
  std::filesystem::create_directories(work);
  const std::string gguf = work + "/hf-tiny-a-f32.gguf";
  const std::string out = work + "/hf-tiny-a-logits.f32";

  std::ifstream ref_in(fixture + "/reference.json");
  nlohmann::json ref = nlohmann::json::parse(ref_in);
  std::string prompt, greedy;
  for (const auto& t : ref["prompt_tokens"]) {
    if (!prompt.empty()) prompt += ',';
    prompt += t.dump();
  }
  for (const auto& t : ref["greedy_tokens"]) {
    if (!greedy.empty()) greedy += ',';
    greedy += t.dump();
  }
  const int n_decode = static_cast<int>(ref["greedy_tokens"].size());

  Run("'" + bin + "' convert '" + fixture + "' '" + gguf + "' --type f32");
  std::string printed =
      Run("'" + bin + "' logits -m '" + gguf + "' --tokens " + prompt + " --decode " +
          std::to_string(n_decode) + " --numerics hf --act-quant off -o '" + out + "'");

  std::vector<float> want = ReadFloats(fixture + "/prefill_logits.f32");
  std::vector<float> dec = ReadFloats(fixture + "/decode_logits.f32");
  want.insert(want.end(), dec.begin(), dec.end());
  std::vector<float> got = ReadFloats(out);
  if (got.size() != want.size()) {
    std::fprintf(stderr, "logits: %zu values, reference has %zu\n", got.size(), want.size());
    return 1;
  }
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i)
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  // `flashkv logits` prints the greedy ids as "[a,b,...]" or "a,b,..."; compare digits only.
  std::string digits_got, digits_want;
  for (char c : printed) digits_got += (std::isdigit(static_cast<unsigned char>(c)) ? c : ' ');
  for (char c : greedy) digits_want += (std::isdigit(static_cast<unsigned char>(c)) ? c : ' ');
  std::istringstream a(digits_got), b(digits_want);
  std::vector<long> ga, gb;
  for (long x; a >> x;) ga.push_back(x);
  for (long x; b >> x;) gb.push_back(x);
  std::printf(
      "hf-tiny-a parity: max |logit diff| %.3g over %zu values (tolerance %.3g), greedy %s\n",
      max_diff, got.size(), tol, ga == gb ? "matches" : "DIFFERS");
  return (max_diff <= tol && ga == gb) ? 0 : 1;
}
