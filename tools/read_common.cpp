#include "read_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "cli_util.h"
#include "common/error.h"
#include "common/parse_size.h"
#include "status_line.h"
#include "stdin_spool.h"

namespace sqar::cli {

void report(const char* cmd, const std::string& image, const std::string& message) {
  const std::string prefix = std::string("sqar ") + cmd + ": ";
  print_message(prefix + (message.rfind(image + ":", 0) == 0 ? message : image + ": " + message));
}

uint64_t parse_offset_arg(const std::string& text) {
  auto v = parse_size(text);
  if (!v) throw UsageError("invalid --offset '" + text + "' (bytes, e.g. 4096 or 1M)");
  return *v;
}

std::unique_ptr<reader::Image> open_image(const std::string& path, uint64_t offset, size_t cache_bytes,
                                          bool kernel_limits) {
  reader::ImageOptions options;
  options.offset = offset;
  options.kernel_limits = kernel_limits;
  if (cache_bytes) options.cache_bytes = cache_bytes;
  if (path != "-") {
    // The reader says a pipe cannot seek; a user who wrote /dev/stdin wants the way that works.
    if (struct stat st; stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode))
      throw Error(path +
                  ": is a pipe, which cannot seek, and a SquashFS image is read by seeking: give '-' as "
                  "IMAGE to read standard input (it is copied to a temporary file first)");
    return reader::Image::open(path, options);
  }
  options.fd = seekable_stdin();
  try {
    auto image = reader::Image::open(path, options);  // keeps its own duplicate
    close(options.fd);
    return image;
  } catch (...) {
    close(options.fd);
    throw;
  }
}

size_t streaming_cache_bytes(unsigned jobs) { return std::clamp<size_t>(size_t(jobs) << 22, 8u << 20, 64u << 20); }

std::string normalize_image_path(const std::string& path) {
  std::string out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string comp = path.substr(i, j - i);
    if (!comp.empty() && comp != ".") {
      if (!out.empty()) out += '/';
      out += comp;
    }
    i = j + 1;
  }
  return out;
}

std::vector<std::string> image_pattern_args(int argc, char** argv, int first) {
  std::vector<std::string> out;
  // An empty argument is almost always an unset shell variable ("$DIR"): selecting the whole
  // image for it would extract everything. GNU tar reports it as not found.
  for (int i = first; i < argc; ++i)
    if (argv[i][0] == '\0') throw UsageError("empty PATTERN (give '/' or '.' for the whole image)");
  for (int i = first; i < argc; ++i) {
    std::string p = normalize_image_path(argv[i]);
    if (p.empty()) return {};
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace sqar::cli
