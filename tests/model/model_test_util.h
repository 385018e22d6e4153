// Helpers for model tests: fixture paths, and a copy of ds4-tiny.gguf with edits (drop or
// replace a tensor, change a metadata value) for malformed-model tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "gguf/ds4_keys.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace flashkv::testing {

inline std::string FixturePath(const std::string& rel) {
  return std::string(FLASHKV_FIXTURES_DIR) + "/" + rel;
}
inline std::string Ds4TinyPath() {
  return FixturePath("ds4-tiny/ds4-tiny.gguf");
}

// A path in this process's own scratch folder under the build tree (removed at exit).
// CTest runs every gtest case as its own process, several at once: a file that each
// process writes "once" must not share a path (or the writer's `<path>.tmp`) with another.
inline std::string ProcessTmpPath(const std::string& name) {
  struct Dir {
    std::filesystem::path path;
    Dir()
        : path(std::filesystem::path(FLASHKV_BINARY_DIR) / "test-tmp" /
               ("proc-" + std::to_string(::getpid()))) {
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return (dir.path / name).string();
}

// Reads a float32 file.
inline std::vector<float> ReadF32(const std::string& path) {
  std::vector<float> v;
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  if (fp == nullptr) return v;
  float buf[4096];
  size_t n;
  while ((n = std::fread(buf, sizeof(float), 4096, fp)) > 0) v.insert(v.end(), buf, buf + n);
  std::fclose(fp);
  return v;
}

struct TensorEdit {
  std::string name;
  bool drop = false;
  std::vector<uint64_t> ne;  // replacement shape (data cut or zero-padded to fit)
  DType type = DType::kF32;  // used with ne
};

inline TensorEdit DropTensor(std::string name) {
  TensorEdit e;
  e.name = std::move(name);
  e.drop = true;
  return e;
}

inline TensorEdit ReplaceTensor(std::string name, std::vector<uint64_t> ne, DType type) {
  TensorEdit e;
  e.name = std::move(name);
  e.ne = std::move(ne);
  e.type = type;
  return e;
}

// Copies every metadata key except the tokenizer's (the model does not read them) and
// `drop_keys`, and every tensor of ds4-tiny into a writer, applying the edits; `meta` may
// then override keys.
inline GgufWriter CopyDs4Tiny(const std::vector<TensorEdit>& edits,
                              const std::function<void(GgufWriter&)>& meta = {},
                              const std::vector<std::string>& drop_keys = {}) {
  auto file = GgufFile::Open(Ds4TinyPath());
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  GgufWriter w;
  for (const std::string& key : file->keys()) {
    if (key.rfind("tokenizer.", 0) == 0) continue;
    if (std::find(drop_keys.begin(), drop_keys.end(), key) != drop_keys.end()) continue;
    const GgufType t = *file->TypeOf(key);
    switch (t) {
      case GgufType::kString:
        w.SetString(key, *file->GetString(key));
        break;
      case GgufType::kBool:
        w.SetBool(key, *file->GetBool(key));
        break;
      case GgufType::kF32:
      case GgufType::kF64:
        w.SetF32(key, float(*file->GetF64(key)));
        break;
      case GgufType::kArray: {
        const GgufArrayInfo a = *file->ArrayInfo(key);
        if (a.elem_type == GgufType::kF32 || a.elem_type == GgufType::kF64) {
          const std::vector<double> values = file->GetFloatArray(key).value();
          std::vector<float> v(values.begin(), values.end());
          w.SetF32Array(key, v);
        } else {
          const std::vector<int64_t> values = file->GetIntArray(key).value();
          std::vector<int32_t> v(values.begin(), values.end());
          w.SetI32Array(key, v);
        }
        break;
      }
      default:
        w.SetU64(key, *file->GetU64(key));
    }
  }
  for (const GgufTensorInfo& t : file->tensors()) {
    const TensorEdit* edit = nullptr;
    for (const auto& e : edits) {
      if (e.name == t.name) edit = &e;
    }
    if (edit != nullptr && edit->drop) continue;
    if (edit != nullptr) {
      const uint64_t bytes = *TensorBytes(edit->type, edit->ne.data(), int(edit->ne.size()));
      std::vector<uint8_t> data(bytes, 0);
      std::copy(t.data, t.data + std::min(bytes, t.nbytes), data.begin());
      EXPECT_TRUE(w.AddTensor(t.name, edit->type, edit->ne, std::move(data)).ok());
      continue;
    }
    EXPECT_TRUE(
        w.AddTensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes)).ok());
  }
  if (meta) meta(w);
  return w;
}

// The edited copy as an in-memory GgufFile.
inline GgufFile EditedDs4Tiny(const std::vector<TensorEdit>& edits,
                              const std::function<void(GgufWriter&)>& meta = {},
                              const std::vector<std::string>& drop_keys = {}) {
  auto bytes = CopyDs4Tiny(edits, meta, drop_keys).WriteToBytes();
  EXPECT_TRUE(bytes.ok());
  auto f = GgufFile::FromBytes(std::move(*bytes));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return std::move(*f);
}

// ds4-tiny cut to its first four layers (sliding, sliding, ratio 4 + indexer, ratio 8)
// with a 16-token window, the ratio-128 layer at ratio 8 (its position bias cut to 8
// slots) and indexer top-k 4, written once per process (ProcessTmpPath). Short prompts
// then wrap the window, close heavily-compressed windows and make the indexer choose,
// which keeps whole-model unit tests fast (also under ASan). Layer 4's tensors stay in the
// file unused.
inline std::string SmallWindowDs4TinyPath() {
  static const std::string path = [] {
    const std::string p = ProcessTmpPath("ds4-tiny-small-window.gguf");
    GgufWriter w =
        CopyDs4Tiny({ReplaceTensor("blk.3.attn_compressor_ape.weight", {192, 8}, DType::kF16)},
                    [](GgufWriter& m) {
                      m.SetU32(Ds4Key(ds4_key::kBlockCount), 4);
                      m.SetU32(Ds4Key(ds4_key::kSlidingWindow), 16);
                      m.SetI32Array(Ds4Key(ds4_key::kCompressRatios), {0, 0, 4, 8});
                      m.SetU32(Ds4Key(ds4_key::kIndexerTopK), 4);
                    });
    const Status s = w.Write(p);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return p;
  }();
  return path;
}

}  // namespace flashkv::testing
