// Model ids of the Hugging Face Hub ("zai-org/GLM-5.2-FP8") resolved offline through the local
// Hub cache, the way transformers finds them, so `--model-path org/name` works after
// `hf download org/name` without the user digging out the snapshot folder. Nothing is downloaded.
#pragma once

#include <string>

namespace tandem {

// Where the cache may live; read from the process environment by from_environment(), set by hand
// in tests. An empty field is unset.
struct HubEnv {
  std::string hf_hub_cache;  // $HF_HUB_CACHE: the cache root itself
  std::string hf_home;       // $HF_HOME: the cache root is $HF_HOME/hub
  std::string home;          // $HOME: the cache root is ~/.cache/huggingface/hub

  static HubEnv from_environment();
  // The cache root transformers would use: HF_HUB_CACHE, else HF_HOME/hub, else the home default.
  std::string cache_root() const;
};

// True for text shaped like a Hub id: "org/name", exactly one slash, neither part empty, not
// starting with '/' or '.'. Anything else is only ever a path.
bool is_hub_id(const std::string& s);

// The folder to load from. A path that exists is returned as given (a local directory always
// wins over an id of the same text), as is anything not shaped like an id (the loader then reports
// the missing config.json). An id is looked up as
//   <cache root>/models--{org}--{name}/snapshots/{hash}
// where hash is `revision` itself when it is a 40-hex commit hash, else the contents of
// refs/{revision} (default "main"). An id not in the cache throws InvalidArgument naming `flag`,
// every folder looked in and the command that downloads it.
std::string resolve_model_path(const std::string& path_or_id, const std::string& revision = "",
                               const char* flag = "--model-path",
                               const HubEnv& env = HubEnv::from_environment());

}  // namespace tandem
