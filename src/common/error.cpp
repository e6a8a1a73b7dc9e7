#include "common/error.h"

#include <cstring>

namespace sqar {

std::string errno_message(const std::string& path, int errnum) { return path + ": " + std::strerror(errnum); }

void throw_errno(const std::string& path, int errnum) { throw Error(errno_message(path, errnum)); }

}  // namespace sqar
