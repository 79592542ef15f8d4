// A Hugging Face checkpoint folder: config.json plus either model.safetensors or
// model.safetensors.index.json with its shards. Opening validates every shard header and the
// index against the shards, so later lookups cannot fail on a half-broken folder.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/safetensors.h"

namespace tandem {

class Checkpoint {
 public:
  // Throws tandem::Error naming the file (and tensor) on a missing shard, a tensor the index
  // lists but its shard lacks, a corrupt header, or a tensor present in two shards.
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const { return by_name_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  // The shard file holding `name` (for error messages).
  const std::string& file_of(const std::string& name) const;
  Tensor tensor(const std::string& name) const;  // zero-copy CPU view
  std::vector<std::string> names() const;
  uint64_t total_bytes() const;

 private:
  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> by_name_;
};

// Writes tensors as a Hub-layout checkpoint into dir: model.safetensors when everything fits
// in one shard, else model-0000i-of-0000n.safetensors plus model.safetensors.index.json.
void write_checkpoint_shards(const std::string& dir,
                             const std::vector<std::pair<std::string, Tensor>>& tensors,
                             uint64_t max_shard_bytes);

}  // namespace tandem
