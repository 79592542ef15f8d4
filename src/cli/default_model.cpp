#include "cli/default_model.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace tandem::cli {

namespace {

namespace fs = std::filesystem;

// <prefix>/share/tandem/<rel> for the running binary at <prefix>/bin/tandem, if it exists.
std::string installed(const std::string& rel) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path p = exe.parent_path().parent_path() / "share" / "tandem" / rel;
  return fs::exists(p, ec) ? p.string() : "";
}

std::string first_of(const std::string& rel, const char* env, const fs::path& in_tree) {
  if (std::string p = installed(rel); !p.empty()) return p;
  if (const char* e = std::getenv(env); e && *e) return e;
  return in_tree.string();
}

}  // namespace

std::string default_model_path() {
  return first_of("models/tandem-austen", "TANDEM_DEFAULT_MODEL",
                  fs::path(TANDEM_SOURCE_DIR) / "models" / "tandem-austen");
}

std::string default_bench_prompts_path() {
  return first_of("bench/prompts.txt", "TANDEM_BENCH_PROMPTS",
                  fs::path(TANDEM_SOURCE_DIR) / "bench" / "data" / "prompts.txt");
}

}  // namespace tandem::cli
