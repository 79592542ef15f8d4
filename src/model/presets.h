// Named model configurations: the real GLM-5 / GLM-5.2 / DeepSeek-V3(.2) shapes (for dummy
// weights and benchmarks) and tiny versions of each for tests and the built-in default model.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace tandem {

std::vector<std::string> preset_names();
// Throws tandem::Error listing the known presets if name is unknown.
ModelConfig preset_config(const std::string& name);

}  // namespace tandem
