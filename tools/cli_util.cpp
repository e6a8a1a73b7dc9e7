#include "cli_util.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace sqar::cli {

std::optional<uint64_t> parse_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno || end == text.c_str() || text[0] == '-') return std::nullopt;
  std::string suffix(end);
  uint64_t mult = 1;
  if (suffix.empty() || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = 1ull << 30;
  else return std::nullopt;
  return uint64_t(v) * mult;
}

std::optional<int64_t> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end) return std::nullopt;
  return int64_t(v);
}

std::string counted(uint64_t n, const char* singular, const char* plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out;
}

}  // namespace sqar::cli
