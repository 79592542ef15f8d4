#include "cli/default_model.h"

#include <cstdlib>
#include <filesystem>

namespace tandem::cli {

std::string default_model_path() {
  if (const char* e = std::getenv("TANDEM_DEFAULT_MODEL")) return e;
  const std::filesystem::path shipped = std::filesystem::path(TANDEM_SOURCE_DIR) / "models" / "tandem-austen";
  if (std::filesystem::exists(shipped / "config.json")) return shipped.string();
  return TANDEM_DEFAULT_MODEL_DIR;
}

}  // namespace tandem::cli
