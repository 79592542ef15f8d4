// tandem make-token-map: the draft vocabulary for --speculative-token-map. Tokenizes a corpus
// with the model's tokenizer, counts every token and writes the K most frequent ids (ties by id)
// as a JSON array, the model's end-of-sequence ids always among them, so that drafts can still
// propose the end of a reply. Prints the share of the corpus's tokens the map covers.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "model/hub_cache.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

namespace {

// A .json file holding a list of strings is those texts; any other file is one text.
std::vector<std::string> read_texts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument("--corpus " + path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  if (std::filesystem::path(path).extension() == ".json") {
    const nlohmann::json j = nlohmann::json::parse(all, nullptr, /*allow_exceptions=*/false);
    if (j.is_array() &&
        std::all_of(j.begin(), j.end(), [](const auto& v) { return v.is_string(); }))
      return j.get<std::vector<std::string>>();
  }
  return {all};
}

// config.json's eos_token_id: one id or a list.
std::vector<int32_t> eos_ids(const std::filesystem::path& dir) {
  std::ifstream in(dir / "config.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<int32_t> out;
  if (j.is_discarded() || !j.contains("eos_token_id")) return out;
  const nlohmann::json& e = j["eos_token_id"];
  if (e.is_number_integer()) out.push_back(e.get<int32_t>());
  if (e.is_array())
    for (const auto& v : e)
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  return out;
}

}  // namespace

Runner add_make_token_map(CLI::App& app) {
  struct Args {
    std::string model_path, revision = "main", output;
    std::vector<std::string> corpus;
    int64_t size = 0;
  };
  auto a = std::make_shared<Args>();
  app.add_option(
      "--model-path", a->model_path,
      "Checkpoint folder or Hub id whose tokenizer counts (default: the built-in model)");
  app.add_option("--revision", a->revision, "Branch, tag or commit of a Hub id");
  app.add_option("--corpus", a->corpus,
                 "Text files (a .json list of strings counts as those texts), e.g. typical "
                 "prompts and replies")
      ->required();
  app.add_option("--size", a->size, "Tokens in the map (K)")
      ->required()
      ->check(CLI::PositiveNumber);
  app.add_option("--output", a->output, "Where to write the JSON array of token ids")->required();
  return [a] {
    std::string dir = a->model_path.empty() ? default_model_path() : a->model_path;
    dir = resolve_model_path(dir, a->revision, "--model-path");
    const Tokenizer tok =
        Tokenizer::from_file((std::filesystem::path(dir) / "tokenizer.json").string());
    const int64_t V = tok.vocab_size();
    std::vector<uint64_t> count(static_cast<size_t>(V), 0);
    uint64_t total = 0;
    for (const std::string& file : a->corpus)
      for (const std::string& text : read_texts(file))
        for (int32_t t : tok.encode(text)) {
          if (t < 0 || t >= V) continue;
          count[static_cast<size_t>(t)] += 1;
          total += 1;
        }
    if (total == 0) throw InvalidArgument("--corpus: no tokens in the given files");
    std::vector<int32_t> order(static_cast<size_t>(V));
    for (int32_t t = 0; t < V; ++t) order[static_cast<size_t>(t)] = t;
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t x, int32_t y) { return count[x] > count[y]; });
    std::vector<int32_t> ids;
    for (int32_t e : eos_ids(dir))
      if (e >= 0 && e < V) ids.push_back(e);
    for (int32_t t : order) {
      if (static_cast<int64_t>(ids.size()) >= std::min(a->size, V)) break;
      if (std::find(ids.begin(), ids.end(), t) == ids.end()) ids.push_back(t);
    }
    uint64_t covered = 0;
    for (int32_t t : ids) covered += count[static_cast<size_t>(t)];
    std::ofstream out(a->output);
    out << nlohmann::json(ids).dump() << "\n";
    if (!out) throw InvalidArgument("--output " + a->output + ": cannot write the file");
    std::printf("%zu of %lld tokens written to %s; they are %.2f%% of the corpus's %llu tokens\n",
                ids.size(), static_cast<long long>(V), a->output.c_str(), 100.0 * covered / total,
                static_cast<unsigned long long>(total));
    return 0;
  };
}

}  // namespace tandem::cli
