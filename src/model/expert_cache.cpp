#include "model/expert_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/expert_cache_plan.h"

namespace flashkv {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

// How many experts' copies go to the backend in one WriteMany.
constexpr size_t kCopiesPerBatch = 96;

// options.slots, or fewer when options.device_bytes_left says the device cannot hold them
// beside the staging buffers and keep_free_bytes.
int64_t FittingSlots(const ExpertCacheOptions& options, uint64_t slot_bytes) {
  if (!options.device_bytes_left || options.slots <= 0 || slot_bytes == 0) return options.slots;
  const std::optional<uint64_t> left = options.device_bytes_left();
  if (!left) return options.slots;
  const uint64_t other = 2 * uint64_t(std::max<int64_t>(options.stage_experts, 0)) * slot_bytes +
                         options.keep_free_bytes;
  const uint64_t room = *left > other ? *left - other : 0;
  return std::min<int64_t>(options.slots, int64_t(room / slot_bytes));
}

}  // namespace

Expected<std::unique_ptr<ExpertCache>> ExpertCache::Create(const ModelConfig& config,
                                                           ModelWeights& weights,
                                                           const GgufFile& file, Backend& backend,
                                                           const ExpertCacheOptions& options) {
  const int L = config.n_layer;
  const int E = config.n_expert;
  if (L <= 0 || E <= 0 || weights.layers.size() != size_t(L)) {
    return InvalidArgument("expert cache: {} layers of weights for {} layers of {} experts",
                           weights.layers.size(), L, E);
  }
  const int64_t total = int64_t(L) * E;
  if (options.slots < 0 || options.slots > total) {
    return InvalidArgument("expert cache: {} slots for {} experts", options.slots, total);
  }
  std::unique_ptr<ExpertCache> c(new ExpertCache(backend, options, L, E));
  // The device reads the experts through a shared mapping of the file: pinning pages of the
  // model's private one made the kernel copy them (an 81 GB file in /dev/shm was killed for
  // memory on a 125 GiB host), and a shared mapping's pages are the page cache's own.
  // Files without a path (in-memory GGUFs) are read where they are.
  const uint8_t* host_base = nullptr;
  if (!file.path().empty()) {
    const int fd = ::open(file.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError("cannot open {}: {}", file.path(), std::strerror(errno));
    struct stat st {};
    void* p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && uint64_t(st.st_size) == file.file_size()) {
      p = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    }
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
      return IoError("expert cache: cannot map {} shared: {}", file.path(), std::strerror(err));
    }
    c->shared_ = static_cast<const uint8_t*>(p);
    c->shared_bytes_ = size_t(st.st_size);
    host_base = c->shared_ + file.data_offset();
  }
  c->stacks_.resize(size_t(L));
  uint64_t part_bytes[3] = {0, 0, 0};
  const uint8_t* lo = nullptr;
  const uint8_t* hi = nullptr;
  for (int l = 0; l < L; ++l) {
    LayerWeights& w = weights.layers[size_t(l)];
    Weight* ws[3] = {&w.ffn_gate_exps, &w.ffn_up_exps, &w.ffn_down_exps};
    for (int i = 0; i < 3; ++i) {
      const Weight& st = *ws[i];
      const GgufTensorInfo* t = file.FindTensor(st.name);
      if (t == nullptr || t->type != st.type || st.ne[2] != uint64_t(E) ||
          t->nbytes < st.matrix_bytes() * st.ne[2]) {
        return Corrupt("expert cache: {} is not the bound {}-expert stack", st.name, E);
      }
      Stack& s = c->stacks_[size_t(l)][size_t(i)];
      s.host = host_base != nullptr ? host_base + t->offset : t->data;
      s.matrix_bytes = st.matrix_bytes();
      part_bytes[i] = std::max(part_bytes[i], s.matrix_bytes);
      lo = lo == nullptr ? s.host : std::min(lo, s.host);
      hi = std::max(hi, s.host + s.matrix_bytes * uint64_t(E));
      c->stats_.host_bytes += s.matrix_bytes * uint64_t(E);
    }
  }
  // One mapping over the stacks' page-aligned span of the file (registrations of ranges that
  // share a page would collide).
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const auto lo_a = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(lo) / page * page);
  const auto hi_a =
      reinterpret_cast<const uint8_t*>(AlignUp(reinterpret_cast<uintptr_t>(hi), page));
  DevPtr<const uint8_t> dev(lo_a);
  if (options.pageable_host) {
    if (!backend.ReadsPageableHost()) {
      return FailedPrecondition(
          "expert cache: this device cannot read pageable host memory (no HMM or ATS: the "
          "NVIDIA open kernel modules give it), so the routed experts must be page-locked");
    }
  } else {
    FLASHKV_ASSIGN_OR_RETURN(dev, backend.MapHost(lo_a, size_t(hi_a - lo_a)));
    c->mapped_ = lo_a;
  }
  uint64_t offset = 0;
  for (int i = 0; i < 3; ++i) {
    for (auto& layer : c->stacks_) layer[size_t(i)].slot_offset = offset;
    offset += AlignUp(part_bytes[i], kExpertSlotAlign);
  }
  c->slot_bytes_ = ExpertSlotBytes(part_bytes[0], part_bytes[1], part_bytes[2]);
  for (auto& layer : c->stacks_) {
    for (Stack& s : layer) s.device = dev.get() + (s.host - lo_a);
  }
  // The slots the device really has room for, now that the resident weights are placed.
  const int64_t n_slots = FittingSlots(options, c->slot_bytes_);
  if (n_slots < options.slots) {
    spdlog::warn(
        "expert cache: {} slots instead of the {} planned: the device has less left after the "
        "resident weights than their file bytes promised ({} GiB kept free)",
        n_slots, options.slots, double(options.keep_free_bytes) / double(1ull << 30));
    c->opt_.slots = n_slots;
  }
  c->stats_.slots = n_slots;
  c->stats_.experts = total;
  c->stats_.slot_bytes = c->slot_bytes_;

  if (n_slots > 0) {
    auto slots = backend.Alloc(size_t(c->slot_bytes_) * size_t(n_slots));
    if (!slots.ok()) {
      return slots.status().WithContext(fmt::format("expert cache: {} slots of {:.2f} MiB", n_slots,
                                                    double(c->slot_bytes_) / (1 << 20)));
    }
    c->slots_ = std::move(*slots);
  }
  FLASHKV_ASSIGN_OR_RETURN(c->tables_, backend.Alloc(size_t(total) * 3 * sizeof(void*)));
  FLASHKV_ASSIGN_OR_RETURN(c->counts_, backend.Alloc(size_t(total) * sizeof(uint32_t)));
  c->table_host_.assign(size_t(total) * 3, nullptr);
  c->slot_of_.assign(size_t(total), -1);
  c->holder_.resize(size_t(n_slots));
  c->counts_host_.assign(size_t(total), 0);
  for (int l = 0; l < L; ++l) {
    for (int e = 0; e < E; ++e) c->PointAtHost(ExpertId{l, e});
  }
  // No routing seen yet: spread the slots evenly over the layers, experts 0, 1, … of each.
  std::vector<HostCopy> copies;
  for (int64_t s = 0; s < n_slots; ++s) {
    FLASHKV_RETURN_IF_ERROR(c->Load(ExpertId{int(s % L), int(s / L)}, s, copies));
    if (copies.size() >= 3 * kCopiesPerBatch || s + 1 == n_slots) {
      FLASHKV_RETURN_IF_ERROR(backend.WriteMany(copies.data(), copies.size()));
      copies.clear();
    }
  }
  if (options.stage_experts > 0) {
    const int64_t per = std::min<int64_t>(options.stage_experts, E);
    for (DeviceBuffer& b : c->staging_) {
      auto made = backend.Alloc(size_t(c->slot_bytes_) * size_t(per));
      if (!made.ok()) return made.status().WithContext("expert cache: a prefill staging buffer");
      b = std::move(*made);
    }
    FLASHKV_ASSIGN_OR_RETURN(c->staged_tables_, backend.Alloc(size_t(total) * 3 * sizeof(void*)));
    c->upload_ticket_.assign(size_t(L), 0);
    c->stats_.stage_experts = per;
    // Decode gather: the first staging buffer, idle in steps that do not stage.
    FLASHKV_ASSIGN_OR_RETURN(c->gather_tables_, backend.Alloc(size_t(E) * 3 * sizeof(void*)));
    FLASHKV_ASSIGN_OR_RETURN(c->gather_plan_, backend.Alloc(size_t(1 + per) * sizeof(int32_t)));
  }
  FLASHKV_RETURN_IF_ERROR(c->WriteTables());
  const auto* tables = reinterpret_cast<const uint8_t* const*>(c->tables_.as<void>().get());
  const auto* staged = reinterpret_cast<const uint8_t* const*>(c->staged_tables_.as<void>().get());
  c->staged_weights_.resize(size_t(L));
  if (!c->gather_tables_.empty()) {
    c->gather_.resize(size_t(L));
    const uint8_t* lo_slots = c->slots_.empty() ? nullptr : c->SlotAddress(0);
    for (int l = 0; l < L; ++l) {
      ExpertGather& g = c->gather_[size_t(l)];
      g.tables = DevPtr<const uint8_t* const>(tables + size_t(l) * 3 * E);
      g.out_tables = c->gather_tables_.as<const uint8_t*>();
      g.plan = c->gather_plan_.as<int32_t>();
      g.device_lo = lo_slots;
      g.device_hi = lo_slots == nullptr ? nullptr : c->SlotAddress(n_slots);
      g.scratch = c->staging_[0].as<uint8_t>();
      g.slots = int(c->stats_.stage_experts);
      g.n_expert = E;
      g.slot_bytes = c->slot_bytes_;
      for (int i = 0; i < 3; ++i) {
        g.part_offset[i] = c->stacks_[size_t(l)][size_t(i)].slot_offset;
        g.part_bytes[i] = c->stacks_[size_t(l)][size_t(i)].matrix_bytes;
      }
    }
  }
  for (int l = 0; l < L; ++l) {
    LayerWeights& w = weights.layers[size_t(l)];
    Weight* ws[3] = {&w.ffn_gate_exps, &w.ffn_up_exps, &w.ffn_down_exps};
    for (int i = 0; i < 3; ++i) {
      ws[i]->data = DevPtr<const uint8_t>();
      ws[i]->experts = DevPtr<const uint8_t* const>(tables + (size_t(l) * 3 + size_t(i)) * E);
      Weight& sw = c->staged_weights_[size_t(l)][size_t(i)];
      sw = *ws[i];
      if (staged != nullptr) {
        sw.experts = DevPtr<const uint8_t* const>(staged + (size_t(l) * 3 + size_t(i)) * E);
      }
    }
  }
  return c;
}

ExpertCache::~ExpertCache() {
  if (mapped_ != nullptr) {
    (void)be_.Synchronize();  // no kernel may still read the mapping
    be_.UnmapHost(mapped_);
  }
  if (shared_ != nullptr) munmap(const_cast<uint8_t*>(shared_), shared_bytes_);
}

DevPtr<uint32_t> ExpertCache::counts(int layer) const {
  return counts_.as<uint32_t>() + size_t(layer) * size_t(n_expert_);
}

const uint8_t* ExpertCache::SlotAddress(int64_t slot) const {
  return slots_.as<const uint8_t>().get() + uint64_t(slot) * slot_bytes_;
}

void ExpertCache::PointAtHost(ExpertId id) {
  for (int i = 0; i < 3; ++i) {
    const Stack& s = stacks_[size_t(id.layer)][size_t(i)];
    table_host_[(size_t(id.layer) * 3 + size_t(i)) * size_t(n_expert_) + size_t(id.expert)] =
        s.device + s.matrix_bytes * uint64_t(id.expert);
  }
}

Status ExpertCache::Load(ExpertId id, int64_t slot, std::vector<HostCopy>& copies) {
  if (slot < 0 || slot >= int64_t(holder_.size())) {
    return Internal("expert cache: slot {} of {}", slot, holder_.size());
  }
  const uint8_t* base = SlotAddress(slot);
  for (int i = 0; i < 3; ++i) {
    const Stack& s = stacks_[size_t(id.layer)][size_t(i)];
    uint8_t* dst = const_cast<uint8_t*>(base + s.slot_offset);
    copies.push_back(HostCopy{DevPtr<void>(dst),
                              const_cast<uint8_t*>(s.host + s.matrix_bytes * uint64_t(id.expert)),
                              size_t(s.matrix_bytes)});
    table_host_[(size_t(id.layer) * 3 + size_t(i)) * size_t(n_expert_) + size_t(id.expert)] =
        base + s.slot_offset;
  }
  slot_of_[Index(id.layer, id.expert)] = slot;
  holder_[size_t(slot)] = id;
  return Status::Ok();
}

Status ExpertCache::WriteTables() {
  FLASHKV_RETURN_IF_ERROR(
      be_.Write(tables_.as<void>(), table_host_.data(), table_host_.size() * sizeof(void*)));
  if (staged_tables_.empty()) return Status::Ok();
  BuildStagedTables();
  return be_.Write(staged_tables_.as<void>(), staged_host_.data(),
                   staged_host_.size() * sizeof(void*));
}

void ExpertCache::BuildStagedTables() {
  staged_host_ = table_host_;
  stage_list_.assign(size_t(n_layer_), {});
  const int64_t cap = std::min<int64_t>(opt_.stage_experts, n_expert_);
  for (int l = 0; l < n_layer_; ++l) {
    const uint8_t* buffer = staging_[l % 2].as<const uint8_t>().get();
    std::vector<int>& list = stage_list_[size_t(l)];
    for (int e = 0; e < n_expert_ && int64_t(list.size()) < cap; ++e) {
      if (slot_of_[Index(l, e)] >= 0) continue;
      const uint8_t* base = buffer + uint64_t(list.size()) * slot_bytes_;
      for (int i = 0; i < 3; ++i) {
        staged_host_[(size_t(l) * 3 + size_t(i)) * size_t(n_expert_) + size_t(e)] =
            base + stacks_[size_t(l)][size_t(i)].slot_offset;
      }
      list.push_back(e);
    }
  }
}

Status ExpertCache::UploadLayer(int layer, uint64_t after) {
  std::vector<HostCopy> copies;
  const uint8_t* buffer = staging_[layer % 2].as<const uint8_t>().get();
  const std::vector<int>& list = stage_list_[size_t(layer)];
  for (size_t p = 0; p < list.size(); ++p) {
    for (const Stack& s : stacks_[size_t(layer)]) {
      copies.push_back(HostCopy{
          DevPtr<void>(const_cast<uint8_t*>(buffer + uint64_t(p) * slot_bytes_ + s.slot_offset)),
          const_cast<uint8_t*>(s.host + s.matrix_bytes * uint64_t(list[p])),
          size_t(s.matrix_bytes)});
      stats_.staged_bytes += s.matrix_bytes;
    }
  }
  FLASHKV_ASSIGN_OR_RETURN(upload_ticket_[size_t(layer)],
                           be_.UploadAfter(after, copies.data(), copies.size()));
  return Status::Ok();
}

Status ExpertCache::BeginStagedStep() {
  ++stats_.staged_steps;
  // The buffers were last read by the previous step's layers: after every op so far.
  for (int l = 0; l < std::min(2, n_layer_); ++l) {
    FLASHKV_ASSIGN_OR_RETURN(const uint64_t mark, be_.MarkOps());
    FLASHKV_RETURN_IF_ERROR(UploadLayer(l, mark));
  }
  return Status::Ok();
}

Status ExpertCache::BeforeStagedFfn(int layer) {
  return be_.WaitUpload(upload_ticket_[size_t(layer)]);
}

Status ExpertCache::AfterStagedFfn(int layer) {
  if (layer + 2 >= n_layer_) return Status::Ok();
  FLASHKV_ASSIGN_OR_RETURN(const uint64_t mark, be_.MarkOps());
  return UploadLayer(layer + 2, mark);
}

Status ExpertCache::BeforeStep() {
  ++stats_.steps;
  if (opt_.fold_interval <= 0 || stats_.steps % uint64_t(opt_.fold_interval) != 0) {
    return Status::Ok();
  }
  return Fold();
}

Status ExpertCache::Fold() {
  const size_t n = counts_host_.size();
  FLASHKV_RETURN_IF_ERROR(
      be_.Read(counts_.as<const void>(), counts_host_.data(), n * sizeof(uint32_t)));
  cached_mask_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t c = counts_host_[i];
    const int layer = int(i / size_t(n_expert_));
    if (slot_of_[i] >= 0) {
      stats_.hits += c;
      cached_mask_[i] = 1;
    } else {
      stats_.misses += c;
      for (const Stack& s : stacks_[size_t(layer)])
        stats_.miss_bytes += uint64_t(c) * s.matrix_bytes;
    }
  }
  heat_.Add(counts_host_);
  std::fill(counts_host_.begin(), counts_host_.end(), 0u);
  FLASHKV_RETURN_IF_ERROR(be_.Write(counts_.as<void>(), counts_host_.data(), n * sizeof(uint32_t)));
  if (holder_.empty()) return Status::Ok();

  const std::vector<ExpertSwap> swaps = heat_.PlanSwaps(cached_mask_, opt_.max_swaps, opt_.margin);
  if (swaps.empty()) return Status::Ok();
  std::vector<HostCopy> copies;
  for (const ExpertSwap& sw : swaps) {
    const int64_t slot = slot_of_[Index(sw.evict.layer, sw.evict.expert)];
    slot_of_[Index(sw.evict.layer, sw.evict.expert)] = -1;
    PointAtHost(sw.evict);
    FLASHKV_RETURN_IF_ERROR(Load(sw.admit, slot, copies));
    for (const Stack& s : stacks_[size_t(sw.admit.layer)]) stats_.swap_bytes += s.matrix_bytes;
  }
  stats_.swaps += swaps.size();
  // Stream order: every earlier step's kernels, then the slots' new bytes, then the tables
  // that point at them; the next step's kernels come after both.
  FLASHKV_RETURN_IF_ERROR(be_.WriteMany(copies.data(), copies.size()));
  return WriteTables();
}

}  // namespace flashkv
