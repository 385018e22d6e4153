// Model::StepScratch: the host-side lists of one forward step (model/forward_batch.cpp),
// kept in the Model between steps so that a decode step allocates nothing once its batch
// size has been seen (ModelAllocTest). Internal to src/model/.
#pragma once

#include <utility>
#include <vector>

#include "model/chunk_context.h"
#include "model/model.h"

namespace flashkv {

struct Model::StepScratch {
  std::vector<SessionChunk> chunks;       // ForwardBatch's non-empty chunks
  std::vector<int32_t> tokens;            // every row's token id
  std::vector<int64_t> positions;         // every row's position in its session
  std::vector<Activations> views;         // each session's rows
  std::vector<ChunkContext> sessions;     // each session's context, over its view
  std::vector<std::pair<int, int>> runs;  // the head's input: (first row, rows)
  std::vector<HostCopy> copies;           // logits back to each session's buffer
  std::vector<AttentionArgs> attention;   // each session's attention in a layer
  std::vector<CompressorArgs> compress;   // each session's compressor update in a layer
  std::vector<WindowStoreArgs> stores;    // each session's window store in a layer
  std::vector<NormRopeArgs> finish;       // each session's closed rows of a compressor
};

}  // namespace flashkv
