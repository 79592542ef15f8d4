// Random weights of a configuration created directly on the target device (`--load-format
// dummy`): full-size shapes can be run and benchmarked without a checkpoint.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/loader.h"
#include "model/weights.h"

namespace tandem {

ModelWeights dummy_weights(const ModelConfig& c, const LoadOptions& o, uint64_t seed);

}  // namespace tandem
