#include "core/tensor.h"

#include <cstring>

#include "core/error.h"

namespace tandem {

Shape::Shape(std::initializer_list<int64_t> dims) {
  TD_CHECK(dims.size() <= kMaxDims, "at most {} dims, got {}", kMaxDims, dims.size());
  for (int64_t d : dims) d_[ndim_++] = d;
}

Shape::Shape(const std::vector<int64_t>& dims) {
  TD_CHECK(dims.size() <= kMaxDims, "at most {} dims, got {}", kMaxDims, dims.size());
  for (int64_t d : dims) d_[ndim_++] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= d_[i];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim_; ++i) s += (i ? ", " : "") + std::to_string(d_[i]);
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  if (ndim_ != o.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if (d_[i] != o.d_[i]) return false;
  return true;
}

Storage::Storage(Device dev, size_t bytes) : dev_(dev), bytes_(bytes), owned_(true) {
  data_ = device_interface(dev.type).allocate(dev, bytes);
}

Storage::Storage(Device dev, void* data, size_t bytes, std::shared_ptr<void> keepalive)
    : dev_(dev), data_(data), bytes_(bytes), owned_(false), keepalive_(std::move(keepalive)) {}

Storage::~Storage() {
  if (owned_ && data_) device_interface(dev_.type).deallocate(dev_, data_);
}

static void set_contiguous_strides(const Shape& s, std::array<int64_t, Shape::kMaxDims>& st) {
  int64_t acc = 1;
  for (int i = s.ndim() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device dev) {
  Tensor t;
  t.storage_ =
      std::make_shared<Storage>(dev, static_cast<size_t>(shape.numel() * dtype_size(dtype)));
  t.dtype_ = dtype;
  t.shape_ = shape;
  set_contiguous_strides(shape, t.strides_);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device dev) {
  Tensor t = empty(shape, dtype, dev);
  t.fill_zero();
  return t;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device dev,
                    std::shared_ptr<void> keepalive) {
  Tensor t;
  t.storage_ =
      std::make_shared<Storage>(dev, data, shape.numel() * dtype_size(dtype), std::move(keepalive));
  t.dtype_ = dtype;
  t.shape_ = shape;
  set_contiguous_strides(shape, t.strides_);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& shape) {
  TD_CHECK(static_cast<int64_t>(v.size()) == shape.numel(), "from_vector: {} values for {}",
           v.size(), shape.str());
  Tensor t = empty(shape, DType::F32);
  std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

Tensor Tensor::from_vector(const std::vector<int32_t>& v, const Shape& shape) {
  TD_CHECK(static_cast<int64_t>(v.size()) == shape.numel(), "from_vector: {} values for {}",
           v.size(), shape.str());
  Tensor t = empty(shape, DType::I32);
  std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

int64_t Tensor::size(int d) const {
  if (d < 0) d += ndim();
  TD_CHECK(d >= 0 && d < ndim(), "dim {} out of range for {}", d, str());
  return shape_[d];
}

int64_t Tensor::stride(int d) const {
  if (d < 0) d += ndim();
  TD_CHECK(d >= 0 && d < ndim(), "dim {} out of range for {}", d, str());
  return strides_[d];
}

bool Tensor::is_contiguous() const {
  int64_t acc = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != acc) return false;
    acc *= shape_[i];
  }
  return true;
}

void* Tensor::raw() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_;
}

Tensor Tensor::view(const Shape& shape) const {
  TD_CHECK(is_contiguous(), "view of a non-contiguous tensor {}", str());
  // One -1 dimension is inferred, as in torch.
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.ndim(); ++i) {
    if (s[i] == -1) {
      TD_CHECK(infer < 0, "view: more than one -1 in {}", shape.str());
      infer = i;
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) s[infer] = known == 0 ? 0 : numel() / known;
  TD_CHECK(s.numel() == numel(), "view: {} cannot hold {}", s.str(), str());
  Tensor t = *this;
  t.shape_ = s;
  set_contiguous_strides(s, t.strides_);
  return t;
}

Tensor Tensor::narrow(int dim, int64_t start, int64_t len) const {
  if (dim < 0) dim += ndim();
  TD_CHECK(dim >= 0 && dim < ndim(), "narrow: dim {} of {}", dim, str());
  TD_CHECK(start >= 0 && len >= 0 && start + len <= shape_[dim], "narrow: [{}, {}) of dim {} in {}",
           start, start + len, dim, str());
  Tensor t = *this;
  t.shape_[dim] = len;
  t.offset_ += static_cast<size_t>(start * strides_[dim] * dtype_size(dtype_));
  return t;
}

Tensor Tensor::select(int dim, int64_t i) const {
  if (dim < 0) dim += ndim();
  Tensor t = narrow(dim, i, 1);
  std::vector<int64_t> dims;
  std::array<int64_t, Shape::kMaxDims> st{};
  int k = 0;
  for (int d = 0; d < ndim(); ++d) {
    if (d == dim) continue;
    dims.push_back(shape_[d]);
    st[k++] = strides_[d];
  }
  t.shape_ = Shape(dims);
  t.strides_ = st;
  return t;
}

Tensor Tensor::unsqueeze(int dim) const {
  if (dim < 0) dim += ndim() + 1;
  TD_CHECK(dim >= 0 && dim <= ndim() && ndim() < Shape::kMaxDims, "unsqueeze({}) of {}", dim,
           str());
  std::vector<int64_t> dims = shape_.vec();
  dims.insert(dims.begin() + dim, 1);
  Tensor t = *this;
  t.shape_ = Shape(dims);
  for (int d = ndim(); d > dim; --d) t.strides_[d] = strides_[d - 1];
  t.strides_[dim] = dim < ndim() ? strides_[dim] * shape_[dim] : 1;
  return t;
}

Tensor Tensor::merge_dims(int d) const {
  if (d < 0) d += ndim();
  TD_CHECK(d >= 0 && d + 1 < ndim(), "merge_dims({}) of {}", d, str());
  TD_CHECK(strides_[d] == strides_[d + 1] * shape_[d + 1] || shape_[d] == 1,
           "merge_dims({}): dims are not adjacent in memory in {}", d, str());
  std::vector<int64_t> dims = shape_.vec();
  dims[d] *= dims[d + 1];
  dims.erase(dims.begin() + d + 1);
  Tensor t = *this;
  t.shape_ = Shape(dims);
  t.strides_[d] = strides_[d + 1];
  for (int i = d + 1; i < ndim() - 1; ++i) t.strides_[i] = strides_[i + 1];
  return t;
}

Tensor Tensor::unflatten(int d, int64_t a, int64_t b) const {
  if (d < 0) d += ndim();
  TD_CHECK(d >= 0 && d < ndim() && ndim() < Shape::kMaxDims, "unflatten({}) of {}", d, str());
  TD_CHECK(a >= 0 && b >= 0 && a * b == shape_[d], "unflatten({}, {}, {}): {} elements in {}", d, a,
           b, shape_[d], str());
  std::vector<int64_t> dims = shape_.vec();
  dims[d] = b;
  dims.insert(dims.begin() + d, a);
  Tensor t = *this;
  t.shape_ = Shape(dims);
  for (int i = ndim(); i > d; --i) t.strides_[i] = strides_[i - 1];
  t.strides_[d] = strides_[d] * b;
  return t;
}

Tensor Tensor::to(Device dev) const {
  TD_CHECK(is_contiguous(), "to({}): tensor must be contiguous: {}", dev.str(), str());
  Tensor t = empty(shape_, dtype_, dev);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::clone() const {
  return contiguous().to(device());
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  TD_CHECK(device().is_cpu(), "contiguous() of a strided device tensor is not supported: {}",
           str());
  Tensor out = empty(shape_, dtype_, device());
  const int64_t es = dtype_size(dtype_);
  const int64_t n = numel();
  auto* dst = static_cast<char*>(out.raw());
  const auto* src = static_cast<const char*>(raw());
  std::array<int64_t, Shape::kMaxDims> idx{};
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < ndim(); ++d) off += idx[d] * strides_[d];
    std::memcpy(dst + i * es, src + off * es, es);
    for (int d = ndim() - 1; d >= 0; --d) {
      if (++idx[d] < shape_[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  TD_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_, "copy_from: {} into {}", src.str(), str());
  TD_CHECK(src.is_contiguous() && is_contiguous(), "copy_from needs contiguous tensors: {} -> {}",
           src.str(), str());
  const Device d = device(), s = src.device();
  // The non-CPU side owns the copy.
  DeviceInterface& di = device_interface(d.is_cpu() ? s.type : d.type);
  di.copy(raw(), d, src.raw(), s, static_cast<size_t>(nbytes()));
}

void Tensor::fill_zero() {
  TD_CHECK(is_contiguous(), "fill_zero needs a contiguous tensor: {}", str());
  device_interface(device().type).memset(device(), raw(), 0, static_cast<size_t>(nbytes()));
}

Tensor Tensor::to_f32() const {
  TD_CHECK(device().is_cpu(), "to_f32 is host-only: {}", str());
  Tensor src = contiguous();
  Shape s = shape_;
  if (dtype_ == DType::FP4X2) s[s.ndim() - 1] *= 2;
  Tensor out = empty(s, DType::F32);
  convert_to_f32(dtype_, src.raw(), out.data<float>(), numel());
  return out;
}

Tensor Tensor::to_dtype(DType dt) const {
  TD_CHECK(device().is_cpu(), "to_dtype is host-only: {}", str());
  Tensor f = dtype_ == DType::F32 ? contiguous() : to_f32();
  if (dt == DType::F32) return f.storage_ == storage_ ? f.clone() : f;
  Tensor out = empty(f.shape_, dt);
  convert_from_f32(dt, f.data<float>(), out.raw(), f.numel());
  return out;
}

std::string Tensor::str() const {
  return fmt::format("{}{} {}", dtype_name(dtype_), shape_.str(), device().str());
}

std::vector<float> to_float_vector(const Tensor& t) {
  Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  Tensor f = h.to_f32();
  return {f.data<float>(), f.data<float>() + f.numel()};
}

std::vector<int32_t> to_int_vector(const Tensor& t) {
  TD_CHECK(t.dtype() == DType::I32, "to_int_vector needs i32, got {}", t.str());
  Tensor h = t.device().is_cpu() ? t.contiguous() : t.to(Device::cpu());
  return {h.data<int32_t>(), h.data<int32_t>() + h.numel()};
}

}  // namespace tandem
