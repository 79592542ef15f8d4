#include "model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace tandem {

namespace fs = std::filesystem;

Checkpoint Checkpoint::open(const std::string& dir) {
  Checkpoint c;
  c.dir_ = dir;
  if (!fs::is_directory(dir)) fail("{}: checkpoint folder does not exist", dir);
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(index)) {
    // Nesting bounded while parsing, as for config.json and the safetensors headers.
    constexpr int kMaxDepth = 128;
    struct TooDeep {};
    nlohmann::json j;
    try {
      std::ifstream in(index);
      j = nlohmann::json::parse(in,
                                [](int depth, nlohmann::json::parse_event_t e, nlohmann::json&) {
                                  if ((e == nlohmann::json::parse_event_t::object_start ||
                                       e == nlohmann::json::parse_event_t::array_start) &&
                                      depth >= kMaxDepth)
                                    throw TooDeep{};
                                  return true;
                                });
    } catch (const TooDeep&) {
      fail("{}: JSON nested deeper than {} levels", index.string(), kMaxDepth);
    } catch (const std::exception& e) {
      fail("{}: not valid JSON: {}", index.string(), e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail("{}: missing the weight_map object", index.string());
    std::map<std::string, std::vector<std::string>> by_file;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it->is_string())
        fail("{}: weight_map['{}'] is not a file name", index.string(), it.key());
      by_file[it->get<std::string>()].push_back(it.key());
    }
    for (const auto& [file, tensors] : by_file) {
      const fs::path p = fs::path(dir) / file;
      if (!fs::exists(p))
        fail("{}: shard '{}' listed in the index (for tensor '{}') is missing", dir, file,
             tensors.front());
      auto f = SafetensorsFile::open(p.string());
      for (const auto& t : tensors)
        if (!f->has(t))
          fail("{}: the index places tensor '{}' here but the file lacks it", p.string(), t);
      c.files_.push_back(std::move(f));
    }
  } else if (fs::exists(single)) {
    c.files_.push_back(SafetensorsFile::open(single.string()));
  } else {
    // Some checkpoints ship unindexed shards; take every *.safetensors file.
    std::vector<fs::path> shards;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") shards.push_back(e.path());
    std::sort(shards.begin(), shards.end());
    if (shards.empty()) fail("{}: no model.safetensors, index, or *.safetensors files", dir);
    for (const auto& p : shards) c.files_.push_back(SafetensorsFile::open(p.string()));
  }
  for (const auto& f : c.files_) {
    for (const auto& [name, e] : f->entries()) {
      auto [it, inserted] = c.by_name_.emplace(name, f.get());
      if (!inserted)
        fail("{}: tensor '{}' appears in two shards ({} and {})", dir, name, it->second->path(),
             f->path());
    }
  }
  return c;
}

const SafetensorsEntry& Checkpoint::entry(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) fail("{}: checkpoint has no tensor '{}'", dir_, name);
  return it->second->entry(name);
}

const std::string& Checkpoint::file_of(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) fail("{}: checkpoint has no tensor '{}'", dir_, name);
  return it->second->path();
}

Tensor Checkpoint::tensor(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) fail("{}: checkpoint has no tensor '{}'", dir_, name);
  return it->second->tensor(name);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> v;
  for (const auto& [n, f] : by_name_) v.push_back(n);
  return v;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_)
    for (const auto& [name, e] : f->entries()) n += e.end - e.begin;
  return n;
}

void write_checkpoint_shards(const std::string& dir,
                             const std::vector<std::pair<std::string, Tensor>>& tensors,
                             uint64_t max_shard_bytes) {
  fs::create_directories(dir);
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards(1);
  uint64_t cur = 0, total = 0;
  for (const auto& nt : tensors) {
    const uint64_t n = static_cast<uint64_t>(nt.second.nbytes());
    if (cur > 0 && cur + n > max_shard_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(nt);
    cur += n;
    total += n;
  }
  if (shards.size() == 1) {
    write_safetensors((fs::path(dir) / "model.safetensors").string(), shards[0],
                      {{"format", "pt"}});
    return;
  }
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    write_safetensors((fs::path(dir) / file).string(), shards[i], {{"format", "pt"}});
    for (const auto& nt : shards[i]) map[nt.first] = file;
  }
  index["weight_map"] = map;
  std::ofstream out(fs::path(dir) / "model.safetensors.index.json");
  out << index.dump(2) << "\n";
}

}  // namespace tandem
