// Tensor: a strided view (shape, strides in elements, dtype, device) over shared storage.
// Views share storage; the storage frees itself when the last view goes away. Memory that
// belongs to someone else (an mmap'd checkpoint) is wrapped with a keep-alive handle.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace tandem {

class Shape {
 public:
  static constexpr int kMaxDims = 6;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  int64_t numel() const;
  std::vector<int64_t> vec() const { return {d_.begin(), d_.begin() + ndim_}; }
  std::string str() const;
  bool operator==(const Shape& o) const;

 private:
  std::array<int64_t, kMaxDims> d_{};
  int ndim_ = 0;
};

class Storage {
 public:
  // Owning storage allocated through the device interface.
  Storage(Device dev, size_t bytes);
  // Non-owning storage; `keepalive` (may be null) holds whatever backs the memory.
  Storage(Device dev, void* data, size_t bytes, std::shared_ptr<void> keepalive);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return dev_; }

 private:
  Device dev_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = false;
  std::shared_ptr<void> keepalive_;
};

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dtype, Device dev = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype, Device dev = Device::cpu());
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device dev,
                     std::shared_ptr<void> keepalive = nullptr);
  // CPU tensor filled from a host vector.
  static Tensor from_vector(const std::vector<float>& v, const Shape& shape);
  static Tensor from_vector(const std::vector<int32_t>& v, const Shape& shape);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  // Negative d counts from the end, as in Python.
  int64_t size(int d) const;
  int64_t stride(int d) const;
  int64_t numel() const { return shape_.numel(); }
  int64_t nbytes() const { return numel() * dtype_size(dtype_); }
  bool is_contiguous() const;

  void* raw() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // Same storage, new shape; requires a contiguous tensor with the same numel.
  Tensor view(const Shape& shape) const;
  // Sub-range [start, start+len) along dim, sharing storage.
  Tensor narrow(int dim, int64_t start, int64_t len) const;
  // Removes dim by taking index i along it.
  Tensor select(int dim, int64_t i) const;
  // Inserts a size-1 dim at position dim (strided views allowed).
  Tensor unsqueeze(int dim) const;
  // Merges dims d and d+1 into one; needs stride[d] == stride[d+1] * size[d+1] (any view).
  Tensor merge_dims(int d) const;
  // Splits dim d of size a * b into (a, b), sharing storage (any view: the split dim's stride is
  // kept for b, so a row range of a wider matrix can become [T, H, d] per-head rows).
  Tensor unflatten(int d, int64_t a, int64_t b) const;

  Tensor to(Device dev) const;  // copy (contiguous) to another device
  Tensor clone() const;         // contiguous copy on the same device
  // This tensor if contiguous, else a contiguous copy (strided gather; CPU only).
  Tensor contiguous() const;
  // CPU only: contiguous copy converted to fp32 (from any float type).
  Tensor to_f32() const;
  // CPU only: contiguous copy converted from fp32 to dtype.
  Tensor to_dtype(DType dt) const;
  // Copies src into this (same shape, dtype; both contiguous; any devices).
  void copy_from(const Tensor& src);
  void fill_zero();

  std::string str() const;  // "bf16[4, 576] cpu"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  DType dtype_ = DType::F32;
  Shape shape_;
  std::array<int64_t, Shape::kMaxDims> strides_{};
};

// Host copies of small tensors (any device) as vectors.
std::vector<float> to_float_vector(const Tensor& t);
std::vector<int32_t> to_int_vector(const Tensor& t);

}  // namespace tandem
