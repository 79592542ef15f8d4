// Placeholder until the serve command lands (being written now); replaced, not kept.
#include "cli/commands.h"
#include "core/error.h"

namespace tandem::cli {

Runner add_serve(CLI::App& app) {
  return []() -> int { fail("tandem serve is not built yet"); };
}

}  // namespace tandem::cli
