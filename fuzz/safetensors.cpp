// Fuzzes the safetensors header parser: any file either opens with every tensor's bytes inside
// the mapping, or throws tandem::Error. Reading each tensor's bytes lets a bad bounds check show
// up as a fault instead of passing silently.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz/mem_file.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tandem::fuzz::MemFile file(data, size);
  try {
    auto st = tandem::SafetensorsFile::open(file.path());
    uint8_t sum = 0;
    for (const auto& [name, entry] : st->entries()) {
      const tandem::Tensor t = st->tensor(name);
      const auto* bytes = static_cast<const uint8_t*>(t.raw());
      for (int64_t i = 0; i < t.nbytes(); ++i) sum ^= bytes[i];
    }
    // Keeps the reads above from being optimized away.
    volatile uint8_t sink = sum;
    (void)sink;
  } catch (const tandem::Error&) {
  }
  return 0;
}
