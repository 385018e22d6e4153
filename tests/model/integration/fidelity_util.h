// Shared by the fidelity tests: running the flashkv binary, reading float32 logit files
// and the per-row statistics the fixture README prescribes (max |Δ| per row, median,
// argmax agreement).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace flashkv::testing {

inline std::string Fixture(const std::string& rel) {
  return std::string(FLASHKV_FIXTURES_DIR) + "/" + rel;
}

// A fresh scratch directory under the build tree for one test.
inline std::string ScratchDir(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(FLASHKV_BINARY_DIR) / "test-tmp" / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
};

// Runs `flashkv <args>`; stderr goes to the test log.
inline CommandResult RunFlashkv(const std::string& args) {
  const std::string cmd = std::string(FLASHKV_BINARY_DIR) + "/flashkv " + args;
  CommandResult r;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::vector<float> ReadF32File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline std::vector<int> ParseInts(const std::string& text) {
  std::vector<int> v;
  std::istringstream ss(text);
  int x;
  while (ss >> x) v.push_back(x);
  return v;
}

inline std::string WriteTokens(const std::string& dir, const std::vector<int>& ids) {
  const std::string path = dir + "/tokens.txt";
  std::ofstream out(path);
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  return path;
}

inline int Argmax(const float* x, int n) {
  return int(std::max_element(x, x + n) - x);
}

// Row statistics of `got` [rows, vocab] against rows [ref_row0, ref_row0 + rows) of `ref`.
struct RowStats {
  std::vector<double> max_abs;  // per row
  int argmax_agree = 0;
  int rows = 0;
  double Max() const { return *std::max_element(max_abs.begin(), max_abs.end()); }
  double Median() const {
    std::vector<double> v = max_abs;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
};

inline RowStats CompareRows(const std::vector<float>& got, size_t got_row0,
                            const std::vector<float>& ref, size_t ref_row0, int rows, int vocab) {
  RowStats s;
  s.rows = rows;
  for (int r = 0; r < rows; ++r) {
    const float* a = got.data() + (got_row0 + r) * vocab;
    const float* b = ref.data() + (ref_row0 + r) * vocab;
    double m = 0;
    for (int i = 0; i < vocab; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
    s.max_abs.push_back(m);
    s.argmax_agree += Argmax(a, vocab) == Argmax(b, vocab);
  }
  return s;
}

}  // namespace flashkv::testing
