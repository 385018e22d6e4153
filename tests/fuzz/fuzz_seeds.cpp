// Valid inputs for each fuzz target, built here from the writers the project ships
// (GgufWriter, the snapshot codec, SafetensorsFile's format): mutations of well-formed
// files reach the checks deep inside a parser that random bytes never get past.
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "fuzz_targets.h"
#include "gguf/gguf_writer.h"
#include "kv_remote/remote_frame.h"
#include "model/model_config.h"
#include "model/random_model.h"
#include "snapshot/snapshot_chunks.h"
#include "snapshot/snapshot_codec.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/vocab.h"
#include "util/crc32c.h"
#include "util/sha1.h"

namespace flashkv::fuzz {

KvShape SeedShape() {
  KvShape s;
  s.head_dim = 4;
  s.n_swa = 8;
  s.indexer_dim = 2;
  s.ctx_size = 64;
  s.layers = {KvLayerShape{0, false, false}, KvLayerShape{4, true, true},
              KvLayerShape{8, false, false}};
  return s;
}

SnapshotIdentity SeedIdentity() {
  return SnapshotIdentity{Sha1Of("fuzz-model"), "official/q8"};
}

namespace {

// A vocabulary of every byte-level symbol, a few merges and the chat markers.
Vocab SeedVocab() {
  Vocab v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.emplace_back(byte_level::EncodeByte(uint8_t(b)));
    v.token_types.push_back(int32_t(TokenType::kNormal));
  }
  for (const char* merged : {"He", "ll", "Hell", "lo"}) {
    v.tokens.emplace_back(merged);
    v.token_types.push_back(int32_t(TokenType::kNormal));
  }
  v.merges = {"H e", "l l", "He ll", "l o"};
  for (const char* marker : {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>",
                             "<｜Assistant｜>", "<think>", "</think>"}) {
    v.tokens.emplace_back(marker);
    v.token_types.push_back(int32_t(TokenType::kControl));
  }
  v.bos_id = 260;
  v.eos_id = 261;
  return v;
}

void WriteModelMetadata(const ModelConfig& c, GgufWriter& w) {
  auto k = [](const char* key) { return std::string("deepseek4.") + key; };
  w.SetString("general.architecture", "deepseek4");
  w.SetString("general.name", "fuzz seed");
  w.SetU32(k("block_count"), uint32_t(c.n_layer));
  w.SetU64(k("context_length"), c.context_length);
  w.SetU32(k("embedding_length"), uint32_t(c.n_embd));
  w.SetU32(k("vocab_size"), uint32_t(c.n_vocab));
  w.SetU32(k("attention.head_count"), uint32_t(c.n_head));
  w.SetU32(k("attention.head_count_kv"), uint32_t(c.n_head_kv));
  w.SetU32(k("attention.key_length"), uint32_t(c.head_dim));
  w.SetU32(k("attention.value_length"), uint32_t(c.head_dim));
  w.SetU32(k("rope.dimension_count"), uint32_t(c.n_rot));
  w.SetU32(k("attention.q_lora_rank"), uint32_t(c.q_lora_rank));
  w.SetU32(k("attention.output_lora_rank"), uint32_t(c.o_lora_rank));
  w.SetU32(k("attention.output_group_count"), uint32_t(c.n_out_group));
  w.SetU32(k("expert_count"), uint32_t(c.n_expert));
  w.SetU32(k("expert_used_count"), uint32_t(c.n_expert_used));
  w.SetU32(k("expert_feed_forward_length"), uint32_t(c.n_ff_exp));
  w.SetU32(k("expert_shared_count"), uint32_t(c.n_expert_shared));
  w.SetU32(k("hash_layer_count"), uint32_t(c.n_hash_layer));
  w.SetU32(k("attention.sliding_window"), uint32_t(c.n_swa));
  w.SetU32(k("attention.indexer.head_count"), uint32_t(c.indexer_heads));
  w.SetU32(k("attention.indexer.key_length"), uint32_t(c.indexer_head_dim));
  w.SetU32(k("attention.indexer.top_k"), uint32_t(c.indexer_top_k));
  w.SetU32(k("hyper_connection.count"), uint32_t(c.n_hc));
  w.SetU32(k("hyper_connection.sinkhorn_iterations"), uint32_t(c.hc_sinkhorn_iters));
  w.SetU32(k("rope.scaling.original_context_length"), uint32_t(c.rope_orig_ctx));
  w.SetF32(k("rope.freq_base"), c.rope_freq_base);
  w.SetF32(k("rope.scaling.factor"), c.rope_scaling_factor);
  w.SetF32(k("rope.scaling.yarn_beta_fast"), c.yarn_beta_fast);
  w.SetF32(k("rope.scaling.yarn_beta_slow"), c.yarn_beta_slow);
  w.SetF32(k("attention.compress_rope_freq_base"), c.compress_rope_freq_base);
  w.SetF32(k("expert_weights_scale"), c.expert_weights_scale);
  w.SetF32(k("attention.layer_norm_rms_epsilon"), c.rms_eps);
  w.SetF32(k("hyper_connection.epsilon"), c.hc_eps);
  w.SetBool(k("expert_weights_norm"), true);
  std::vector<uint32_t> ratios(c.compress_ratios.begin(), c.compress_ratios.end());
  w.SetU32Array(k("attention.compress_ratios"), ratios);
  w.SetF32Array(k("swiglu_clamp_exp"), c.swiglu_clamp);
}

Bytes Written(const GgufWriter& w) {
  auto bytes = w.WriteToBytes();
  return bytes.ok() ? *bytes : Bytes();
}

}  // namespace

std::vector<Bytes> GgufSeeds() {
  std::vector<Bytes> out;
  {
    // Every metadata type and a few tensors of different types.
    GgufWriter w;
    w.SetString("general.architecture", "deepseek4");
    w.SetU32("general.alignment", 32);
    w.SetU8("u8", 1);
    w.SetI8("i8", -1);
    w.SetU16("u16", 2);
    w.SetI16("i16", -2);
    w.SetI32("i32", -3);
    w.SetU64("u64", 4);
    w.SetI64("i64", -5);
    w.SetF32("f32", 0.5f);
    w.SetF64("f64", 0.25);
    w.SetBool("bool", true);
    w.SetU32Array("ratios", {0, 0, 4, 128, 4});
    w.SetF32Array("clamp", {10, 10});
    w.SetBoolArray("bools", {true, false});
    w.SetStringArray("tokens", {"a", "Ġb", ""});
    (void)w.AddTensor("blk.0.attn_q_a.weight", DType::kQ8_0, {32, 2}, Bytes(34 * 2, 0x11));
    (void)w.AddTensor("blk.0.attn_norm.weight", DType::kF32, {5}, Bytes(20, 0x22));
    (void)w.AddTensor("blk.0.ffn_gate_tid2eid.weight", DType::kI32, {2, 3}, Bytes(24, 0x33));
    out.push_back(Written(w));
  }
  {
    // A DeepSeek V4 header (the random:tiny shape) with a vocabulary.
    GgufWriter w;
    ModelConfig c = RandomModelConfig(*ParseRandomModelSource("random:tiny"));
    c.n_vocab = int(SeedVocab().size());
    WriteModelMetadata(c, w);
    WriteVocabToGguf(SeedVocab(), w);
    (void)w.AddTensor("token_embd.weight", DType::kF16, {4, 2}, Bytes(16, 0x3c));
    out.push_back(Written(w));
  }
  return out;
}

std::vector<Bytes> SnapshotSeeds() {
  std::vector<Bytes> out;
  CpuBackend be(nullptr);
  for (int64_t n : {int64_t(1), int64_t(13), int64_t(40)}) {
    auto st = KvState::Create(be, SeedShape());
    if (!st.ok() || !st->SetTokenCount(n).ok()) continue;
    for (size_t l = 0; l < SeedShape().layers.size(); ++l) {
      std::vector<float> v(st->LayerFloats(int(l)));
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 17) * 0.5f - float(l);
      (void)st->WriteLayer(int(l), v.data());
    }
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) tokens[size_t(i)] = int32_t((i * 7 + 3) % 1000);
    std::vector<float> logits(32, 0.25f);
    SnapshotContent c;
    c.tokens = tokens;
    c.logits = logits;
    c.text = n > 1 ? "rendered text of the tokens" : "";
    c.reason = SaveReason::kCold;
    if (n == 13) c.replay = "tool ids";
    auto img = CaptureSnapshot(*st, SeedIdentity(), c, 1700000000000);
    if (!img.ok()) continue;
    // Format v2 too: the same state as a manifest of 16-token chunks (named, not on disk:
    // its load stops at the missing chunks) — the chunk list and the trimmed layers parse.
    std::vector<SnapshotChunkRef> refs;
    for (const Sha1Digest& name : ChunkNames(SeedIdentity(), 16, tokens)) {
      refs.push_back({name, ChunkFileBytes(SeedShape(), 16), 0});
    }
    if (auto manifest = MakeManifestImage(*img, 16, refs); manifest.ok()) {
      out.emplace_back(manifest->data(), manifest->data() + manifest->size());
    }
    SealSnapshot(*img);
    out.emplace_back(img->data(), img->data() + img->size());
  }
  return out;
}

std::vector<Bytes> ChunkSeeds() {
  // Chunk files of SeedShape (16 tokens) in versions 3 and 2, then a two-row chunk list.
  const uint64_t payload = ChunkPayloadBytes(SeedShape(), 16);
  std::vector<Bytes> out;
  for (uint32_t version : {kChunkVersion, kChunkVersionV2}) {
    const uint32_t head = version == kChunkVersionV2 ? kChunkHeaderBytes : ChunkHeaderBytesFor(3);
    Bytes file(head + payload);
    for (uint64_t i = 0; i < payload; ++i) file[head + i] = uint8_t(i * 13);
    ChunkHeader h;
    h.version = version;
    h.name = Sha1Of("chunk");
    h.index = 1;
    h.chunk_tokens = 16;
    h.n_layer = 3;
    h.payload_bytes = payload;
    h.payload_crc32c = Crc32c(0, file.data() + head, payload);
    if (version == kChunkVersion) h.layers = ChunkLayerCrcs(SeedShape(), 16, file.data() + head);
    EncodeChunkHeader(h, file.data());
    out.push_back(std::move(file));
  }
  std::vector<SnapshotChunkRef> refs = {{Sha1Of("a"), 1000, 7}, {Sha1Of("b"), 64, 8}};
  const std::string list = EncodeChunkRefs(refs);
  out.emplace_back(list.begin(), list.end());
  return out;
}

std::vector<Bytes> RequestSeeds() {
  auto seed = [](char dialect, std::string_view body) {
    Bytes b{uint8_t(dialect)};
    b.insert(b.end(), body.begin(), body.end());
    return b;
  };
  return {
      seed(
          0,
          R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{\"path\":[1,{\"a\":null}]}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}],"tools":[{"type":"function","function":{"name":"ls","parameters":{"type":"object"}}}],"tool_choice":"auto","max_tokens":5,"temperature":0.5,"stop":["a"],"stream":true,"thinking":{"type":"enabled","budget_tokens":10}})"),
      seed(1, R"({"prompt":["hello"],"max_tokens":3,"top_k":4,"seed":2,"echo":false})"),
      seed(
          2,
          R"({"instructions":"i","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"reasoning","summary":[{"type":"summary_text","text":"r"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"o"},{"type":"local_shell_call","call_id":"c2","action":{"type":"exec","command":["ls"]}},{"type":"local_shell_call_output","call_id":"c2","output":"x"}],"tools":[{"type":"function","name":"f","parameters":{}},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"g"}]}],"reasoning":{"effort":"high","summary":"auto"},"max_output_tokens":9})"),
      seed(
          3,
          R"({"model":"c","max_tokens":8,"system":[{"type":"text","text":"x-anthropic-billing"},{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a</tool_result>"}]}]}],"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":1024}})"),
  };
}

std::vector<Bytes> DsmlSeeds() {
  auto seed = [](uint8_t flags, std::string_view text) {
    Bytes b{flags};
    b.insert(b.end(), text.begin(), text.end());
    return b;
  };
  const std::string call =
      "Let me look.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"read_file\">\n"
      "<｜DSML｜parameter name=\"path\" string=\"true\">/etc/hosts &amp; more</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"limit\" string=\"false\">[10, {\"a\": null}]</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"nested\"><｜DSML｜parameter name=\"x\" string=\"false\">1"
      "</｜DSML｜parameter></｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  return {
      seed(3 | (4 << 2), "thinking first</think>" + call),
      seed(2, call),
      seed(0 | (1 << 2), "plain <tool_calls>\n<invoke name=\"x\">\n</invoke>\n</tool_calls> text"),
  };
}

std::vector<Bytes> SafetensorsSeeds() {
  auto file = [](std::string header, size_t data_bytes) {
    while ((8 + header.size()) % 8) header += ' ';
    Bytes b(8);
    const uint64_t n = header.size();
    std::memcpy(b.data(), &n, 8);
    b.insert(b.end(), header.begin(), header.end());
    for (size_t i = 0; i < data_bytes; ++i) b.push_back(uint8_t(i * 37));
    return b;
  };
  return {
      file(
          R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})",
          32),
      file(
          R"({"w":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"i":{"dtype":"I64","shape":[1],"data_offsets":[2,10]}})",
          10),
  };
}

}  // namespace flashkv::fuzz

namespace flashkv::fuzz {

std::string_view RemoteSeedSecret() {
  return "fuzz secret of some length";
}
std::string_view RemoteSeedKey() {
  return "flashkv:1:m:official/q8:entry:k";
}
Sha1Digest RemoteSeedModel() {
  return Sha1Of("fuzz-model");
}

std::vector<Bytes> RemoteSeeds() {
  // Entry-record frames, unsigned (mode 0) and signed (mode 1), an object part, and RESP
  // replies of every kind the client reads (mode 2).
  const std::string record = "flashkv-remote-entry 1\nkey " + Sha1Hex(Sha1Of("ids")) +
                             "\ntokens 40\nobject aa.kv 1234\nobject " + Sha1Hex(Sha1Of("c")) +
                             ".kvc 99\n";
  auto with_mode = [](uint8_t mode, std::string_view v) {
    Bytes b{mode};
    b.insert(b.end(), v.begin(), v.end());
    return b;
  };
  std::vector<Bytes> out;
  out.push_back(with_mode(0, FrameRemotePart(RemoteSeedModel(), 0, 1, record)));
  out.push_back(with_mode(
      1, FrameRemotePart(RemoteSeedModel(), 0, 1, record, RemoteSeedSecret(), RemoteSeedKey())));
  out.push_back(with_mode(0, FrameRemotePart(RemoteSeedModel(), 0, 3, std::string(300, 'x'))));
  for (const char* reply :
       {"$5\r\nhello\r\n", "*2\r\n$2\r\n40\r\n$2\r\n12\r\n", "-WRONGTYPE wrong kind\r\n", ":1\r\n",
        "+OK\r\n", "$-1\r\n", "*1\r\n*2\r\n:0\r\n:16383\r\n"}) {
    out.push_back(with_mode(2, reply));
  }
  return out;
}

}  // namespace flashkv::fuzz
