#include "core/device.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace tandem {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index);
}

namespace {

class CpuDeviceInterface final : public DeviceInterface {
 public:
  void* allocate(Device, size_t bytes) override {
    // 64-byte alignment keeps vector loads aligned and matches cache lines.
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) fail("out of host memory allocating {} bytes", bytes);
    return p;
  }
  void deallocate(Device, void* p) override { std::free(p); }
  void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) override {
    TD_CHECK(dst_dev.is_cpu() && src_dev.is_cpu(), "cpu copy between {} and {}", dst_dev.str(),
             src_dev.str());
    std::memcpy(dst, src, bytes);
  }
  void memset(Device, void* p, int value, size_t bytes) override { std::memset(p, value, bytes); }
  void synchronize(Device) override {}
  void memory_info(Device, size_t* free, size_t* total) override {
    // MemAvailable / MemTotal from /proc/meminfo (kB).
    *free = *total = 0;
    if (FILE* f = std::fopen("/proc/meminfo", "r")) {
      char key[64];
      unsigned long long kb;
      while (std::fscanf(f, "%63s %llu kB\n", key, &kb) == 2) {
        if (!std::strcmp(key, "MemTotal:")) *total = kb << 10;
        if (!std::strcmp(key, "MemAvailable:")) *free = kb << 10;
      }
      std::fclose(f);
    }
  }
};

CpuDeviceInterface g_cpu;
DeviceInterface* g_cuda = nullptr;

}  // namespace

void register_device_interface(DeviceType t, DeviceInterface* iface) {
  TD_CHECK(t == DeviceType::CUDA, "only the CUDA interface can be registered");
  g_cuda = iface;
}

bool has_device_interface(DeviceType t) {
  return t == DeviceType::CPU || g_cuda != nullptr;
}

DeviceInterface& device_interface(DeviceType t) {
  if (t == DeviceType::CPU) return g_cpu;
  if (!g_cuda) fail("CUDA device requested but this build has no CUDA backend initialised");
  return *g_cuda;
}

}  // namespace tandem
