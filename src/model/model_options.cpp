#include "model/model_options.h"

namespace flashkv {

Expected<NumericsMode> ParseNumericsMode(std::string_view s) {
  if (s == "hf") return NumericsMode::kHf;
  if (s == "official") return NumericsMode::kOfficial;
  return InvalidArgument("unknown numerics mode '{}' (expected hf or official)", s);
}

Expected<ActQuantMode> ParseActQuantMode(std::string_view s) {
  if (s == "off") return ActQuantMode::kOff;
  if (s == "q8") return ActQuantMode::kQ8;
  return InvalidArgument("unknown activation quantization '{}' (expected off or q8)", s);
}

std::string_view NumericsModeName(NumericsMode m) {
  return m == NumericsMode::kHf ? "hf" : "official";
}

Status ApplyNumericsFlag(std::string_view s, ModelOptions* options) {
  if (s == "fast") {
    options->numerics = NumericsMode::kOfficial;
    options->float_path = FloatPath::kFast;
    return Status::Ok();
  }
  if (s != "hf" && s != "official") {
    return InvalidArgument("unknown numerics mode '{}' (expected hf, official or fast)", s);
  }
  FLASHKV_ASSIGN_OR_RETURN(options->numerics, ParseNumericsMode(s));
  options->float_path = FloatPath::kExact;
  return Status::Ok();
}

std::string_view NumericsName(const ModelOptions& options) {
  if (options.float_path == FloatPath::kFast) {
    return options.numerics == NumericsMode::kOfficial ? "fast" : "hf-fast";
  }
  return NumericsModeName(options.numerics);
}

std::string_view ActQuantModeName(ActQuantMode m) {
  return m == ActQuantMode::kOff ? "off" : "q8";
}

Status CheckOfficialNumericsSupported(const ModelConfig& c) {
  if (c.n_nope() % 64 != 0) {
    return Unsupported(
        "official numerics need the no-RoPE head width ({} = key_length {} - rope dims {}) to "
        "be a multiple of the FP8 block of 64; use --numerics hf",
        c.n_nope(), c.head_dim, c.n_rot);
  }
  bool any_indexer = false;
  for (int l = 0; l < c.n_layer; ++l) any_indexer |= c.has_indexer(l);
  const int d = c.indexer_head_dim;
  if (any_indexer && (d < 32 || (d & (d - 1)) != 0)) {
    return Unsupported(
        "official numerics need the indexer key_length ({}) to be a power of two >= 32 "
        "(Hadamard + FP4 blocks of 32); use --numerics hf",
        d);
  }
  return Status::Ok();
}

ModelOptions DefaultModelOptions(const ModelConfig& config) {
  ModelOptions o;
  if (!CheckOfficialNumericsSupported(config).ok()) {
    o.numerics = NumericsMode::kHf;
    o.act_quant = ActQuantMode::kOff;
  }
  return o;
}

}  // namespace flashkv
