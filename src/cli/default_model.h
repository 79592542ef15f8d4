// Where the built-in default model lives.
#pragma once

#include <string>

namespace tandem::cli {

// TANDEM_DEFAULT_MODEL if set; else the trained model shipped in models/tandem-austen.
std::string default_model_path();

}  // namespace tandem::cli
