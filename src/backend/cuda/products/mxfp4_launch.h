// MXFP4 weights (the routed experts of ds4's 0731 files and llama.cpp's MXFP4_MOE files)
// × Q8_0 activations on the GPU (products/mxfp4_matvec.cu): plain products and expert tiles, decode
// and prefill, each output the bits of the CPU's ref::DotMXFP4 (docs/GGUF.md). Internal to
// backend/cuda/; products/matmul.cu's LaunchMatVec / LaunchGateUp dispatch here.
// fp32 activations (act-quant off) are not covered: false.
#pragma once

#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {

// y = W x for MXFP4 rows against Q8_0 activation rows (Q8ActRowBytes layout); false for
// shapes it does not take (rows of a value count that is not a multiple of 32).
bool LaunchMxfp4(CudaBackend::State& s, const MatVecArgs& a);
// Expert gate/up with GateUpKernel's epilogue.
bool LaunchMxfp4(CudaBackend::State& s, const GateUpArgs& g);

// The same for IQ4_NL rows (llama.cpp's IQ4_NL preset; the fallback of the IQ types for rows
// that are not whole 256-value blocks), each output ref::DotIQ4_NL's bits.
bool LaunchIq4nl(CudaBackend::State& s, const MatVecArgs& a);
bool LaunchIq4nl(CudaBackend::State& s, const GateUpArgs& g);

}  // namespace flashkv::cuda
