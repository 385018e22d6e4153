#include "convert/flash_preset.h"

#include <algorithm>
#include <charconv>

#include "convert/ds4_layout.h"
#include "gguf/gguf_types.h"

namespace flashkv {

bool IsFlashPreset(std::string_view preset) {
  return preset == "flash" || preset.substr(0, 6) == "flash:";
}

Status SetFlashWidths(std::string_view preset, Ds4Hparams& hp) {
  if (!IsFlashPreset(preset)) return InvalidArgument("'{}' is not flash[:LAYERS]", preset);
  uint32_t layers = kFlashLayers;
  if (preset.size() > 5) {
    const std::string_view n = preset.substr(6);
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), layers);
    if (ec != std::errc() || end != n.data() + n.size() || layers < 1 || layers > kFlashLayers) {
      return InvalidArgument("preset '{}': LAYERS must be 1..{}", preset, kFlashLayers);
    }
  }
  hp.compress_ratios.clear();
  for (uint32_t l = 0; l < layers; ++l) {
    hp.compress_ratios.push_back(l < 2 ? 0 : (l % 2 == 0 ? 4 : 128));
  }
  hp.n_hash_layer = std::min<uint32_t>(3, layers);
  hp.n_embd = 4096;
  hp.n_head = 64;
  hp.head_dim = 512;
  hp.q_lora_rank = 1024;
  hp.o_groups = 8;
  hp.o_lora_rank = 1024;
  hp.n_expert = 256;
  hp.n_expert_used = 6;
  hp.n_ff_exp = 2048;
  hp.n_swa = 128;
  hp.n_indexer_head = 64;
  hp.indexer_top_k = 512;
  return Status::Ok();
}

Expected<std::vector<TinyTensorEntry>> TinyModelDirectory(const Ds4Hparams& hp) {
  FLASHKV_RETURN_IF_ERROR(hp.Validate());
  std::vector<TinyTensorEntry> out;
  uint64_t offset = 0;
  for (const Ds4TensorSpec& spec : Ds4Layout(hp)) {
    const DType type = Ds4TensorType(spec, Ds4WeightScheme::kQ2);
    FLASHKV_ASSIGN_OR_RETURN(uint64_t nbytes,
                             TensorBytes(type, spec.ne.data(), static_cast<int>(spec.ne.size())));
    // WriteDs4Metadata sets general.alignment to GGUF's default.
    offset = (offset + kGgufDefaultAlignment - 1) / kGgufDefaultAlignment * kGgufDefaultAlignment;
    out.push_back({spec.name, type, spec.ne, offset, nbytes});
    offset += nbytes;
  }
  return out;
}

}  // namespace flashkv
