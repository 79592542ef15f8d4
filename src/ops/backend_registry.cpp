#include "core/error.h"
#include "ops/backend.h"

namespace tandem {

namespace {
Backend* g_backends[2] = {nullptr, nullptr};
}

void register_backend(DeviceType t, Backend* b) {
  g_backends[static_cast<int>(t)] = b;
}

Backend& backend_for(Device d) {
  Backend* b = g_backends[static_cast<int>(d.type)];
  if (!b) fail("no backend registered for {} (call init_backends() first)", d.str());
  return *b;
}

}  // namespace tandem
