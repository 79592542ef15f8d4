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
  // A point to come back to within a step: release(mark()) lets an arena reuse everything
  // allocated after the mark (a layer's intermediates once the layer is done), so a forward
  // needs one layer's activations, not the sum over all layers. Tensors allocated after the
  // mark must not be used afterwards. The base class frees by reference count instead.
  virtual size_t mark() const { return 0; }
  virtual void release(size_t mark) { (void)mark; }
  Device device() const { return device_; }

 private:
  Device device_;
};

}  // namespace tandem
