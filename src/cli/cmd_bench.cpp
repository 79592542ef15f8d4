// Placeholder until the bench command lands (being written now); replaced, not kept.
#include "cli/commands.h"
#include "core/error.h"

namespace tandem::cli {

Runner add_bench(CLI::App& app) {
  return []() -> int { fail("tandem bench is not built yet"); };
}

}  // namespace tandem::cli
