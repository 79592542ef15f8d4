// The CUDA device interface: device memory and copies for core::Tensor.
#include <cuda_runtime.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_init.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"

namespace tandem::cuda {

namespace {

class CudaDeviceInterface final : public DeviceInterface {
 public:
  void* allocate(Device d, size_t bytes) override {
    TD_CUDA_CHECK(cudaSetDevice(d.index));
    void* p = nullptr;
    if (bytes == 0) bytes = 256;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess)
      fail("out of GPU memory on {} allocating {:.1f} MiB: {}", d.str(), bytes / 1048576.0,
           cudaGetErrorString(err));
    return p;
  }
  void deallocate(Device d, void* p) override { cudaFree(p); }
  void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) override {
    cudaMemcpyKind kind = cudaMemcpyDefault;
    if (dst_dev.is_cpu() && src_dev.is_cuda())
      kind = cudaMemcpyDeviceToHost;
    else if (dst_dev.is_cuda() && src_dev.is_cpu())
      kind = cudaMemcpyHostToDevice;
    else if (dst_dev.is_cuda() && src_dev.is_cuda())
      kind = cudaMemcpyDeviceToDevice;
    TD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
  }
  void memset(Device d, void* p, int value, size_t bytes) override {
    TD_CUDA_CHECK(cudaMemset(p, value, bytes));
  }
  void synchronize(Device d) override { TD_CUDA_CHECK(cudaDeviceSynchronize()); }
  void make_current(Device d) override { TD_CUDA_CHECK(cudaSetDevice(d.index)); }
  void memory_info(Device d, size_t* free, size_t* total) override {
    TD_CUDA_CHECK(cudaSetDevice(d.index));
    TD_CUDA_CHECK(cudaMemGetInfo(free, total));
  }
};

CudaDeviceInterface g_iface;

}  // namespace

void install_cuda_backend();  // cuda_backend.cpp

bool init_cuda_backend(int device) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  if (cuda_backend()) return true;  // already set up (tests call init more than once)
  if (device < 0 || device >= n)
    fail(
        "CUDA device {} does not exist: this machine has {} (--base-gpu-id and the local rank "
        "choose it)",
        device, n);
  // First, so that the context, streams and buffers below live on this process's GPU.
  TD_CUDA_CHECK(cudaSetDevice(device));
  register_device_interface(DeviceType::CUDA, &g_iface);
  install_cuda_backend();
  cudaDeviceProp prop;
  TD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  log_info("CUDA device {}: {} ({} SMs, {:.0f} GiB)", device, prop.name, prop.multiProcessorCount,
           prop.totalGlobalMem / 1073741824.0);
  return true;
}

}  // namespace tandem::cuda
