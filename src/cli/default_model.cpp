#include "cli/default_model.h"

#include <cstdlib>
#include <filesystem>

namespace tandem::cli {

std::string default_model_path() {
  if (const char* e = std::getenv("TANDEM_DEFAULT_MODEL")) return e;
  return (std::filesystem::path(TANDEM_SOURCE_DIR) / "models" / "tandem-austen").string();
}

}  // namespace tandem::cli
