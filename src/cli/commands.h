// The `tandem` subcommands. Each registers its flags on the app and returns the function that
// runs it once the command line is parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace tandem::cli {

using Runner = std::function<int()>;

Runner add_make_checkpoint(CLI::App& app);
Runner add_generate(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_bench_offline(CLI::App& app);
Runner add_make_token_map(CLI::App& app);

// The GPU this process works on, known once the command line is parsed (before the backends are
// set up): serve's --base-gpu-id plus the local rank of a spawned rank; 0 otherwise.
int process_cuda_device();

}  // namespace tandem::cli
