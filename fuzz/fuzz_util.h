// Helpers shared by the libFuzzer harnesses.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "reader/image.h"

namespace sqar::fuzz {

// The reader opens images by path, so each input is written to one memfd that lives for the
// whole run and is reopened through /proc/self/fd/N: no disk I/O, no temp files to clean up.
class MemImage {
 public:
  MemImage() {
    fd_ = memfd_create("sqar-fuzz-image", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& store(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || ftruncate(fd_, off_t(size)) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      ssize_t n = pwrite(fd_, data + done, size - done, off_t(done));
      if (n <= 0) std::abort();
      done += size_t(n);
    }
    return path_;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// Small caches: fuzz inputs are tiny and eviction paths deserve exercise too.
inline reader::ImageOptions fuzz_options() {
  reader::ImageOptions o;
  o.cache_bytes = 1u << 20;
  o.metadata_cache_bytes = 256u << 10;
  return o;
}

}  // namespace sqar::fuzz
