#include "model/hub_cache.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace tandem {

namespace fs = std::filesystem;

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool is_commit_hash(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// refs/{revision} holds the commit hash, written by huggingface_hub without a newline; tolerate
// one (and other whitespace) in files written by hand.
std::string read_ref(const fs::path& ref) {
  std::ifstream in(ref);
  if (!in) return "";
  std::string hash;
  in >> hash;
  return hash;
}

}  // namespace

HubEnv HubEnv::from_environment() {
  return HubEnv{env_or_empty("HF_HUB_CACHE"), env_or_empty("HF_HOME"), env_or_empty("HOME")};
}

std::string HubEnv::cache_root() const {
  if (!hf_hub_cache.empty()) return hf_hub_cache;
  if (!hf_home.empty()) return (fs::path(hf_home) / "hub").string();
  return (fs::path(home.empty() ? "~" : home) / ".cache" / "huggingface" / "hub").string();
}

bool is_hub_id(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || s.find('/', slash + 1) != std::string::npos) return false;
  if (slash == 0 || slash + 1 == s.size()) return false;
  return s[0] != '.';
}

std::string resolve_model_path(const std::string& path_or_id, const std::string& revision,
                               const char* flag, const HubEnv& env) {
  std::error_code ec;
  if (fs::exists(path_or_id, ec) || !is_hub_id(path_or_id)) return path_or_id;
  const size_t slash = path_or_id.find('/');
  const std::string org = path_or_id.substr(0, slash), name = path_or_id.substr(slash + 1);
  const std::string rev = revision.empty() ? "main" : revision;
  const fs::path repo = fs::path(env.cache_root()) / fmt::format("models--{}--{}", org, name);
  fs::path looked;  // the most specific place that was missing, for the error
  if (is_commit_hash(rev)) {
    looked = repo / "snapshots" / rev;
  } else {
    const fs::path ref = repo / "refs" / rev;
    const std::string hash = read_ref(ref);
    looked = hash.empty() ? ref : repo / "snapshots" / hash;
  }
  if (fs::is_directory(looked, ec)) return looked.string();
  const std::string rev_flag = revision.empty() ? "" : " --revision " + revision;
  throw InvalidArgument(fmt::format(
      "{} {}: no such local directory, and not in the Hugging Face cache (revision {}): looked "
      "for {} (cache root {}; set HF_HUB_CACHE or HF_HOME to use another); download it with "
      "`hf download {}{}` (or `huggingface-cli download {}{}`)",
      flag, path_or_id, rev, looked.string(), env.cache_root(), path_or_id, rev_flag, path_or_id,
      rev_flag));
}

}  // namespace tandem
