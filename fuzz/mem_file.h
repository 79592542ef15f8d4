// The parsers that take a path (safetensors, config.json) read the fuzzer's bytes from an
// anonymous in-memory file: no disk writes per input, and the real open/mmap path is exercised.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tandem::fuzz {

// An in-memory file holding `size` bytes, closed when this goes out of scope.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) : fd_(memfd_create("fuzz-input", 0)) {
    if (fd_ < 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // A path that open() and std::ifstream accept.
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace tandem::fuzz
