// Where the files that ship with tandem live: the built-in default model and the benchmark's
// prompt text. Looked up, in order, next to the binary as installed (<prefix>/bin/tandem ->
// <prefix>/share/tandem/...), in the environment, then in the source tree an in-tree build was
// configured from.
#pragma once

#include <string>

namespace tandem::cli {

// share/tandem/models/tandem-austen beside the binary; else TANDEM_DEFAULT_MODEL; else
// <source>/models/tandem-austen.
std::string default_model_path();

// share/tandem/bench/prompts.txt beside the binary; else TANDEM_BENCH_PROMPTS; else
// <source>/bench/data/prompts.txt.
std::string default_bench_prompts_path();

}  // namespace tandem::cli
