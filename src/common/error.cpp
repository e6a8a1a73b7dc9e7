#include "common/error.h"

#include <cstring>

namespace sqar {

std::string errno_message(const std::string& path, int errnum) { return path + ": " + std::strerror(errnum); }

void throw_errno(const std::string& path, int errnum) { throw Error(errno_message(path, errnum)); }

std::string without_path_prefix(std::string message, const std::string& path) {
  if (message.size() >= path.size() + 2 && message.compare(0, path.size(), path) == 0 &&
      message.compare(path.size(), 2, ": ") == 0)
    message.erase(0, path.size() + 2);
  return message;
}

}  // namespace sqar
