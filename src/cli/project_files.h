// Where the flashkv binary finds the files the project ships (models/tokenizer/...) when
// the user names none: the current directory first (`make run` runs from the checkout),
// then beside the executable's build directory, then an install's share/flashkv. Must not: hold
// logic beyond path lookup.
#pragma once

#include <string>

#include "util/status.h"

namespace flashkv::cli {

// `relative` (e.g. "models/tokenizer/tokenizer.json") under the working directory, else
// under the parent of the directory holding the flashkv executable (build/ -> checkout), or
// under <ancestor>/share/flashkv (an installed bin/flashkv -> <prefix>/share/flashkv).
Expected<std::string> FindProjectFile(const std::string& relative);

// The model used when --model is not given: ./ds4flash.gguf if it exists (the real model,
// as ds4 does), else the project's tiny default models/flashkv-tiny.gguf (found as
// FindProjectFile does; the relative path when it is nowhere).
std::string DefaultModelPath();

// The model a command loads: `flag` when given, else DefaultModelPath(). NotFound, saying
// how to make one, when that file does not exist.
Expected<std::string> ResolveModelPath(const std::string& flag);

}  // namespace flashkv::cli
