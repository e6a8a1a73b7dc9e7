// Paths into /proc/self/fd, which reach an entry through a descriptor we hold.
#pragma once
#include <string>

namespace sqar {

// Whether /proc is procfs (checked once per process). Anything else mounted there (or
// nothing, in a bare chroot) makes /proc/self/fd/N a name whoever mounted it chose, which a
// path-based call would follow anywhere.
bool proc_is_procfs();

// "/proc/self/fd/FD" (and "/NAME" below it when name is given); throws sqar::Error saying so
// when /proc is not procfs.
std::string proc_fd_path(int fd, const char* name = nullptr);

}  // namespace sqar
