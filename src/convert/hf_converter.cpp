#include "convert/hf_converter.h"

#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "convert/hf_config.h"
#include "convert/hf_tensor_map.h"
#include "convert/safetensors_checkpoint.h"
#include "convert/vocab_fit.h"
#include "gguf/gguf_writer.h"
#include "tensor/half.h"
#include "tensor/quant.h"
#include "tokenizer/vocab.h"
#include "util/progress.h"

namespace flashkv {

Expected<std::vector<uint8_t>> EncodeTensorRows(const std::vector<float>& values, DType type,
                                                const std::vector<uint64_t>& ne) {
  uint64_t count = 1;
  for (uint64_t n : ne) count *= n;
  if (values.size() != count)
    return Internal("{} values for a tensor of {} elements", values.size(), count);
  FLASHKV_ASSIGN_OR_RETURN(uint64_t nbytes,
                           TensorBytes(type, ne.data(), static_cast<int>(ne.size())));
  std::vector<uint8_t> out(nbytes);
  const int64_t row = static_cast<int64_t>(ne[0]);
  const uint64_t rows = count / ne[0];
  switch (type) {
    case DType::kF32:
      std::memcpy(out.data(), values.data(), nbytes);
      return out;
    case DType::kF16:
      F32ToF16Row(values.data(), reinterpret_cast<uint16_t*>(out.data()),
                  static_cast<int64_t>(count));
      return out;
    case DType::kBF16:
      F32ToBF16Row(values.data(), reinterpret_cast<uint16_t*>(out.data()),
                   static_cast<int64_t>(count));
      return out;
    default: {
      if (!CanQuantize(type))
        return Unsupported("no quantizer for {} weights", GetDTypeInfo(type).name);
      FLASHKV_ASSIGN_OR_RETURN(uint64_t row_bytes, RowBytes(type, ne[0]));
      for (uint64_t r = 0; r < rows; ++r)
        FLASHKV_RETURN_IF_ERROR(
            QuantizeRow(type, values.data() + r * ne[0], out.data() + r * row_bytes, row));
      return out;
    }
  }
}

Expected<ConvertReport> ConvertHfCheckpoint(const ConvertOptions& opt) {
  ConvertReport report;
  if (opt.scheme == Ds4WeightScheme::kQ2)
    return Unsupported("convert cannot write q2 (no IQ2_XXS quantizer); use f32, f16 or q8_0");

  FLASHKV_ASSIGN_OR_RETURN(HfModelConfig cfg, LoadHfConfig(opt.hf_dir));
  report.notes = cfg.notes;
  const Ds4Hparams& hp = cfg.hp;
  FLASHKV_ASSIGN_OR_RETURN(SafetensorsCheckpoint ck, SafetensorsCheckpoint::Open(opt.hf_dir));
  const std::vector<Ds4TensorSpec> layout = Ds4Layout(hp);
  auto plan_or = PlanHfTensors(layout, hp, ck);
  if (!plan_or.ok()) return plan_or.status().WithContext(opt.hf_dir);
  const HfTensorPlan plan = std::move(plan_or).value();
  if (!plan.ignored.empty())
    report.notes.push_back(fmt::format("skipped {} MTP / unused-bias tensors (e.g. {})",
                                       plan.ignored.size(), plan.ignored.front()));

  FLASHKV_ASSIGN_OR_RETURN(Vocab vocab, LoadVocabFromTokenizerJson(opt.tokenizer_path));
  FLASHKV_RETURN_IF_ERROR(FitVocabToModel(vocab, hp.n_vocab, &report.notes));

  std::string name = opt.name;
  if (name.empty()) {
    std::filesystem::path p = std::filesystem::path(opt.hf_dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    name = p.filename().string();
  }
  GgufWriter w;
  WriteDs4Metadata(hp, name, w);
  WriteVocabToGguf(vocab, w);

  std::vector<std::string> fell_back;
  size_t kept_mxfp4 = 0;
  for (size_t i = 0; i < layout.size(); ++i) {
    const Ds4TensorSpec* spec = &layout[i];
    const HfTensorSource* src = &plan.sources[i];
    bool fb = false;
    DType type = Ds4TensorType(*spec, opt.scheme, &fb);
    const bool expert = spec->role == Ds4Role::kExpertGateUp || spec->role == Ds4Role::kExpertDown;
    if (opt.keep_mxfp4_experts && expert) {
      if (!src->fp4)
        return Unsupported(
                   "{}: keeping MXFP4 experts needs FP4-packed (I8 + F8_E8M0 scale) "
                   "routed experts, but {} is not",
                   spec->name, src->names.empty() ? "?" : src->names.front())
            .WithContext(opt.hf_dir);
      type = DType::kMXFP4;
      fb = false;
      ++kept_mxfp4;
    }
    if (fb) fell_back.push_back(spec->name);
    GgufWriter::TensorProducer produce;
    if (src->kind == HfTensorSource::Kind::kTokenExperts) {
      produce = [spec, src, &ck, &hp]() -> Expected<std::vector<uint8_t>> {
        FLASHKV_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                                 ReadHfTokenExperts(*src, *spec, hp.n_expert, ck));
        std::vector<uint8_t> bytes(ids.size() * sizeof(int32_t));
        std::memcpy(bytes.data(), ids.data(), bytes.size());
        return bytes;
      };
    } else if (type == DType::kMXFP4) {
      produce = [spec, src, &ck]() { return ReadHfMxfp4(*src, *spec, ck); };
    } else if (src->kind == HfTensorSource::Kind::kStackExperts) {
      // One expert at a time: only the output bytes and one expert's f32 values are held.
      produce = [spec, src, type, &ck]() -> Expected<std::vector<uint8_t>> {
        std::vector<uint8_t> out;
        const std::vector<uint64_t> one = {spec->ne[0], spec->ne[1]};
        for (uint64_t e = 0; e < spec->ne[2]; ++e) {
          FLASHKV_ASSIGN_OR_RETURN(std::vector<float> values, ReadHfExpertFloat(*src, e, ck));
          FLASHKV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, EncodeTensorRows(values, type, one));
          out.insert(out.end(), bytes.begin(), bytes.end());
        }
        return out;
      };
    } else {
      produce = [spec, src, type, &ck]() -> Expected<std::vector<uint8_t>> {
        FLASHKV_ASSIGN_OR_RETURN(std::vector<float> values, ReadHfFloat(*src, *spec, ck));
        return EncodeTensorRows(values, type, spec->ne);
      };
    }
    FLASHKV_RETURN_IF_ERROR(w.AddTensorDeferred(spec->name, type, spec->ne, std::move(produce)));
  }
  if (kept_mxfp4)
    report.notes.push_back(fmt::format(
        "{} routed-expert tensors kept as MXFP4 (the checkpoint's FP4 blocks)", kept_mxfp4));
  if (!fell_back.empty())
    report.notes.push_back(fmt::format(
        "{} tensors stored as F16 because a row is not a whole number of quant blocks: {}",
        fell_back.size(), fmt::join(fell_back, ", ")));
  for (const std::string& n : report.notes) spdlog::info("convert: {}", n);

  {
    Progress progress("convert", layout.size(), "tensors");
    GgufWriter::ProgressFn on_tensor;
    if (opt.show_progress)
      on_tensor = [&](size_t done, size_t, const std::string& t) { progress.Update(done, t); };
    FLASHKV_RETURN_IF_ERROR(w.Write(opt.out_path, on_tensor));
  }
  report.tensors = layout.size();
  std::error_code ec;
  report.bytes = std::filesystem::file_size(opt.out_path, ec);
  return report;
}

}  // namespace flashkv
