#include "snapshot/model_fingerprint.h"

#include <algorithm>
#include <string>

#include "util/file_io.h"

namespace flashkv {

Expected<Sha1Digest> ModelFingerprint(const GgufFile& file) {
  if (file.path().empty()) {
    return InvalidArgument("a model fingerprint needs a GGUF opened from a file");
  }
  FLASHKV_ASSIGN_OR_RETURN(File f, File::OpenRead(file.path()));
  std::string head(file.data_offset(), '\0');
  FLASHKV_RETURN_IF_ERROR(f.ReadAt(0, head.data(), head.size()));
  Sha1 h;
  h.Update("flashkv-model-fingerprint-v1");
  h.Update(head);
  for (const GgufTensorInfo& t : file.tensors()) {
    h.Update(t.data, size_t(std::min<uint64_t>(t.nbytes, 256)));
  }
  return h.Final();
}

}  // namespace flashkv
