// Devices and the hooks a backend registers to allocate and copy memory on its device.
// core never includes CUDA headers: the CUDA backend installs its DeviceInterface at start-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const = default;
  std::string str() const;
};

// Memory services of one device type. Copies may cross devices (host <-> device).
class DeviceInterface {
 public:
  virtual ~DeviceInterface() = default;
  virtual void* allocate(Device d, size_t bytes) = 0;
  virtual void deallocate(Device d, void* p) = 0;
  // Synchronous copy of `bytes` from src (on src_dev) to dst (on dst_dev).
  virtual void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) = 0;
  virtual void memset(Device d, void* p, int value, size_t bytes) = 0;
  virtual void synchronize(Device d) = 0;
  // Bytes free and in total on the device (host RAM for the CPU).
  virtual void memory_info(Device d, size_t* free, size_t* total) = 0;
  // Makes d the calling thread's current device (CUDA: cudaSetDevice), so that work this thread
  // issues goes to it; a process serving one rank of a multi-GPU model calls it on every thread
  // that launches work.
  virtual void make_current(Device d) { (void)d; }
};

void register_device_interface(DeviceType t, DeviceInterface* iface);
// Throws if no backend registered for the device type (e.g. CUDA in a CPU-only build).
DeviceInterface& device_interface(DeviceType t);
bool has_device_interface(DeviceType t);

}  // namespace tandem
