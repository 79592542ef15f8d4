// Where ops allocate their outputs during a forward. The base class allocates fresh tensors;
// a device backend can substitute an arena whose addresses repeat from one forward to the next
// (what CUDA graph replay needs).
#pragma once

#include "core/tensor.h"

namespace tandem {

class Workspace {
 public:
  explicit Workspace(Device d) : device_(d) {}
  virtual ~Workspace() = default;
  virtual Tensor alloc(const Shape& shape, DType dtype) {
    return Tensor::empty(shape, dtype, device_);
  }
  // Starts a new step: an arena reuses its memory from here (earlier tensors become invalid).
  virtual void reset() {}
  Device device() const { return device_; }

 private:
  Device device_;
};

}  // namespace tandem
