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

}  // namespace tandem::cli
