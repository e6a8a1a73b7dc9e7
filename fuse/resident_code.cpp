#include "resident_code.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older headers lack it
#endif

namespace sqar::fuse {

void keep_code_resident() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    // START-END PERMS OFFSET DEV INODE PATH
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, path;
    if (!(fields >> range >> perms >> offset >> dev >> inode)) continue;
    std::getline(fields >> std::ws, path);
    if (perms.size() < 3 || perms[2] != 'x' || path != exe) continue;
    const size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    const uintptr_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (end <= start) continue;
    if (madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_READ) != 0)
      for (uintptr_t p = start; p < end; p += page) (void)*reinterpret_cast<const volatile char*>(p);
  }
}

}  // namespace sqar::fuse
