// Error type used across sqar: a message that already names the file and the cause.
#pragma once
#include <stdexcept>
#include <string>

namespace sqar {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A command-line setting that the inputs, once open, turn out not to allow (a level out of the
// range of the compressor an image brings): a usage error, so the tools exit with status 2.
class OptionError : public Error {
 public:
  using Error::Error;
};

// "PATH: strerror(errnum)" — the shape every I/O error message takes.
std::string errno_message(const std::string& path, int errnum);

[[noreturn]] void throw_errno(const std::string& path, int errnum);

// `message` without its leading "PATH: ", for a report line that names PATH already (the
// reader's errors start with the image's path).
std::string without_path_prefix(std::string message, const std::string& path);

}  // namespace sqar
