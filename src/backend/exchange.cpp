#include "backend/exchange.h"

namespace flashkv {

Status HostRowExchange::MoveRows(Backend& from, DevPtr<const float> src, Backend& to,
                                 DevPtr<float> dst, size_t row_floats,
                                 std::span<const RowMove> moves) {
  if (moves.empty()) return Status::Ok();
  staging_.resize(moves.size() * row_floats);
  const size_t row_bytes = row_floats * sizeof(float);
  std::vector<HostCopy> copies;
  copies.reserve(moves.size());
  for (size_t i = 0; i < moves.size(); ++i) {
    if (moves[i].src_row < 0 || moves[i].dst_row < 0) {
      return InvalidArgument("row exchange: move {} has a negative row", i);
    }
    const DevPtr<const float> row = src + size_t(moves[i].src_row) * row_floats;
    // HostCopy takes a mutable device pointer for both directions; ReadMany only reads it.
    copies.push_back(HostCopy{DevPtr<void>(const_cast<float*>(row.get())),
                              staging_.data() + i * row_floats, row_bytes});
  }
  FLASHKV_RETURN_IF_ERROR(from.ReadMany(copies.data(), copies.size()));
  for (size_t i = 0; i < moves.size(); ++i) {
    copies[i].device = DevPtr<void>((dst + size_t(moves[i].dst_row) * row_floats).get());
  }
  return to.WriteMany(copies.data(), copies.size());
}

}  // namespace flashkv
