#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tandem {

namespace {
// Headers of real checkpoints are at most a few MB; a larger length means a corrupt file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("{}: cannot open safetensors file: {}", path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    fail("{}: cannot stat: {}", path, std::strerror(errno));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail("{}: truncated safetensors file ({} bytes, the header length alone is 8)", path, size);
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail("{}: mmap failed: {}", path, std::strerror(errno));

  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->self_ = f;
  f->path_ = path;
  f->map_ = map;
  f->map_size_ = size;
  const auto* bytes = static_cast<const uint8_t*>(map);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxHeaderBytes || 8 + header_len > size)
    fail("{}: corrupt or truncated header: header length {} but file is {} bytes", path, header_len,
         size);
  f->data_ = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  // A header is a few levels deep; nesting is bounded while parsing because dumping a value (as
  // the error messages below do) is recursive in nlohmann::json.
  constexpr int kMaxHeaderDepth = 128;
  struct TooDeep {};
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len,
                                   [](int depth, nlohmann::json::parse_event_t e, nlohmann::json&) {
                                     if ((e == nlohmann::json::parse_event_t::object_start ||
                                          e == nlohmann::json::parse_event_t::array_start) &&
                                         depth >= kMaxHeaderDepth)
                                       throw TooDeep{};
                                     return true;
                                   });
  } catch (const TooDeep&) {
    fail("{}: header JSON nested deeper than {} levels", path, kMaxHeaderDepth);
  } catch (const std::exception& e) {
    fail("{}: header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("{}: header is not a JSON object", path);

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) fail("{}: __metadata__ is not an object", path);
      for (auto m = it->begin(); m != it->end(); ++m)
        if (m->is_string()) f->metadata_[m.key()] = m->get<std::string>();
      continue;
    }
    const auto& v = *it;
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      fail("{}: tensor '{}': header entry needs dtype, shape and data_offsets", path, name);
    SafetensorsEntry e;
    e.name = name;
    if (!v["dtype"].is_string() || !dtype_from_safetensors(v["dtype"].get<std::string>(), &e.dtype))
      fail("{}: tensor '{}': unsupported dtype {}", path, name, v["dtype"].dump());
    if (!v["shape"].is_array()) fail("{}: tensor '{}': shape is not a list", path, name);
    // Sizes come from the file: every product is overflow-checked, so a shape such as
    // [2^32, 2^32] cannot wrap to a small byte count that matches the data_offsets.
    uint64_t want = dtype_size(e.dtype);
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("{}: tensor '{}': bad shape {}", path, name, v["shape"].dump());
      e.shape.push_back(d.get<int64_t>());
      if (__builtin_mul_overflow(want, static_cast<uint64_t>(e.shape.back()), &want) ||
          want > static_cast<uint64_t>(INT64_MAX))
        fail("{}: tensor '{}': shape {} needs more bytes than any file holds", path, name,
             v["shape"].dump());
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      fail("{}: tensor '{}': data_offsets must be two non-negative integers", path, name);
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    uint64_t data_end = 0;  // end of the tensor's bytes in the file
    if (e.begin > e.end || e.end > data_size ||
        __builtin_add_overflow(e.end, 8 + header_len, &data_end) || data_end > size)
      fail("{}: tensor '{}': bytes [{}, {}) lie outside the {}-byte data section (truncated file?)",
           path, name, e.begin, e.end, data_size);
    if (e.end - e.begin != want)
      fail("{}: tensor '{}': {} {} needs {} bytes but data_offsets span {}", path, name,
           v["dtype"].get<std::string>(), v["shape"].dump(), want, e.end - e.begin);
    ranges.emplace_back(e.begin, e.end);
    f->entries_.emplace(name, std::move(e));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      fail("{}: tensors overlap in the data section at byte {}", path, ranges[i].first);
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, map_size_);
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail("{}: no tensor named '{}'", path_, name);
  return it->second;
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  auto keep = self_.lock();
  // Tensor memory is never written through this view; the mapping is read-only.
  return Tensor::wrap(const_cast<uint8_t*>(data_ + e.begin), Shape(e.shape), e.dtype, Device::cpu(),
                      std::static_pointer_cast<void>(keep));
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::pair<std::string, Tensor>> sorted = tensors;
  // Largest elements first, then by name, as Hugging Face's writer orders them: with the data
  // section 8-byte aligned, every tensor then starts at a multiple of its element size, so typed
  // reads of the zero-copy views are aligned (name order put an I64 after an FP8 tensor at an
  // odd offset: UBSan in Safetensors.RoundTripAllDtypes).
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    const int64_t sa = dtype_size(a.second.dtype()), sb = dtype_size(b.second.dtype());
    return sa != sb ? sa > sb : a.first < b.first;
  });
  uint64_t off = 0;
  for (auto& [name, t] : sorted) {
    TD_CHECK(t.device().is_cpu(), "write_safetensors: {} is on {}", name, t.device().str());
    t = t.contiguous();
    const uint64_t n = static_cast<uint64_t>(t.nbytes());
    header[name] = {{"dtype", std::string(dtype_to_safetensors(t.dtype()))},
                    {"shape", t.shape().vec()},
                    {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h.push_back(' ');  // keeps the data section 8-byte aligned
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("{}: cannot open for writing", path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& [name, t] : sorted) out.write(static_cast<const char*>(t.raw()), t.nbytes());
  if (!out) fail("{}: write failed", path);
}

}  // namespace tandem
