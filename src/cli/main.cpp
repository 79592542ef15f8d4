// tandem: the command-line entry point.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>

#include "backends/init.h"
#include "cli/commands.h"
#include "cli/version.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Tandem: a serving engine for GLM-5-class models with MTP speculative decoding"};
  // Every subcommand's --help shows each option's default (subcommands inherit this).
  app.option_defaults()->always_capture_default();
  // e.g. "tandem 0.1.0 (commit 4858b54, CUDA 12.8.93, sm_90a)"; printed by CLI11, exit 0.
  app.set_version_flag("--version", std::string("tandem ") + tandem::cli::kVersion + " (commit " +
                                        tandem::cli::kGitCommit + ", " + tandem::cli::kBuildCuda +
                                        ")");
  app.require_subcommand(1);
  std::map<CLI::App*, tandem::cli::Runner> runners;
  auto add = [&](const char* name, const char* help, auto adder) {
    CLI::App* sub = app.add_subcommand(name, help);
    runners[sub] = adder(*sub);
  };
  add("make-checkpoint", "Write a random-weight checkpoint (Hub layout) from a preset or a config",
      tandem::cli::add_make_checkpoint);
  add("generate", "Generate a completion for a prompt", tandem::cli::add_generate);
  add("serve", "Serve the OpenAI-compatible and SGLang-native HTTP API", tandem::cli::add_serve);
  add("bench", "Benchmark a running server (compatible with sglang.bench_serving)",
      tandem::cli::add_bench);
  add("bench-offline", "Benchmark the engine in-process, with and without MTP speculation",
      tandem::cli::add_bench_offline);
  add("make-token-map",
      "Write the draft vocabulary for --speculative-token-map: a corpus's most frequent tokens",
      tandem::cli::add_make_token_map);
  CLI11_PARSE(app, argc, argv);
  try {
    tandem::init_backends(tandem::cli::process_cuda_device());
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
