// Fuzzes config.json loading: ModelConfig::from_file parses with a depth limit, reads every
// field and validates ranges. A file is either a config that validates or a tandem::Error
// naming the field; to_json must then work on anything that loaded.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz/mem_file.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tandem::fuzz::MemFile file(data, size);
  try {
    const auto config = tandem::ModelConfig::from_file(file.path());
    (void)config.to_json().dump();
    (void)config.softmax_scale();
    (void)config.arch_name();
  } catch (const tandem::Error&) {
  }
  return 0;
}
