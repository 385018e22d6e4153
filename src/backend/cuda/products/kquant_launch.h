// Q3_K, Q5_K, Q6_K (llama.cpp's K-quant ladders: Q4_K_M's Q5_K / Q6_K parts, Q3_K_*), IQ2_XS,
// IQ1_M, IQ3_XXS, IQ3_S, IQ2_S, IQ1_S and IQ4_XS (the IQ presets) weights × Q8_K activations
// on the GPU (products/kquant_matvec.cu): plain products and
// expert tiles, decode and prefill, each output the bits of the CPU's ref::DotQ8
// (tensor/quant_lanes.h holds the split both sides compute). Internal to backend/cuda/;
// products/matmul.cu's LaunchMatVec / LaunchGateUp dispatch here. fp32 activations (act-quant
// off): LaunchKQuantF32, for these types, IQ4_NL and MXFP4.
#pragma once

#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {

// Whether LaunchKQuant takes weights of this type.
bool HasKQuantKernel(DType type);
// y = W x against Q8_K activation rows (Q8ActRowBytes layout); false for types it does not
// take and rows that are not whole 256-value blocks.
bool LaunchKQuant(CudaBackend::State& s, DType type, const MatVecArgs& a);
// Expert gate/up with GateUpKernel's epilogue.
bool LaunchKQuant(CudaBackend::State& s, DType type, const GateUpArgs& g);

// y = W x against fp32 activation rows (act-quant off) for the types above, IQ4_NL and MXFP4:
// the dequantized values (DequantizeRow's) times x in the GPU's fp32 order (per-lane fused
// chains, an xor tree), so within rounding of the CPU's DotF32, not its bits. false for other
// types and rows that are not whole 256-value blocks.
bool LaunchKQuantF32(CudaBackend::State& s, DType type, const MatVecArgs& a);
bool LaunchKQuantF32(CudaBackend::State& s, DType type, const GateUpArgs& g);

// Embedding rows of a table of these types (token_embd of a K-quant / IQ file), each value
// DequantizeRow's bits, copied to n_copies streams: out [n_tokens, n_copies, n_embd].
struct KQuantEmbedArgs {
  const uint8_t* table = nullptr;  // [n_vocab, row_bytes]
  uint64_t row_bytes = 0;
  const int32_t* tokens = nullptr;  // [n_tokens]
  int n_tokens = 0;
  int n_embd = 0;
  int n_copies = 0;
  float* out = nullptr;
};
// false for other types and rows that are not whole 256-value blocks.
bool LaunchKQuantEmbed(CudaBackend::State& s, DType type, const KQuantEmbedArgs& a);

}  // namespace flashkv::cuda
