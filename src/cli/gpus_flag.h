// --gpus: which CUDA devices one flashkv process drives (docs/MULTI_GPU.md). "auto" is every
// device present, in order; "0,2" those ordinals (as CUDA numbers them after
// CUDA_VISIBLE_DEVICES), in that order. Pure text against a device count, so the errors are
// testable without a GPU. Must not: open a device (Runtime does).
#pragma once

#include <string_view>
#include <vector>

#include "util/status.h"

namespace flashkv::cli {

// The ordinals `spec` names among `device_count` devices. No device (a build without CUDA,
// or no driver or GPU: `why_none` says which) is kUnsupported; a malformed list, a number
// that is no device and a repeated one are kInvalidArgument (a malformed list is reported
// before the devices are looked at). The messages name the flag.
Expected<std::vector<int>> ParseGpus(std::string_view spec, int device_count,
                                     std::string_view why_none);

}  // namespace flashkv::cli
