// The word for a file's type in messages ("m is a file, not a directory").
#pragma once
#include <sys/stat.h>

namespace sqar {

inline const char* file_type_name(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR: return "directory";
    case S_IFREG: return "file";
    case S_IFLNK: return "symlink";
    case S_IFCHR: return "character device";
    case S_IFBLK: return "block device";
    case S_IFIFO: return "FIFO";
    case S_IFSOCK: return "socket";
    default: return "special file";
  }
}

}  // namespace sqar
