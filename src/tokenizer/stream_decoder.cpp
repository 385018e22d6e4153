#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace flashkv {

Expected<std::string> StreamDecoder::Push(int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= tokenizer_->vocab_size()) {
    return OutOfRange("token id {} is outside the vocabulary of {}", id, tokenizer_->vocab_size());
  }
  pending_ += tokenizer_->TokenBytes(id);
  size_t hold = utf8::IncompleteTailLength(pending_);
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace flashkv
