#include "tarin/pax_xattr_names.h"

#include <optional>
#include <unordered_set>

namespace sqar {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `name` with each %XX replaced by its byte, or nullopt when it holds no %XX or holds
// something else after a '%'.
std::optional<std::string> percent_decoded(const std::string& name) {
  if (name.find('%') == std::string::npos) return std::nullopt;
  std::string out;
  out.reserve(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%') {
      out += name[i];
      continue;
    }
    const int hi = i + 2 < name.size() ? hex_value(name[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_value(name[i + 2]) : -1;
    if (lo < 0 || (hi == 0 && lo == 0)) return std::nullopt;
    out += char(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace

void decode_pax_xattr_names(std::vector<std::pair<std::string, std::string>>& xattrs) {
  std::vector<std::optional<std::string>> decoded;
  decoded.reserve(xattrs.size());
  std::unordered_set<std::string> decoded_names;  // what the encoded names stand for
  for (const auto& [name, value] : xattrs) {
    decoded.push_back(percent_decoded(name));
    if (decoded.back()) decoded_names.insert(*decoded.back());
  }
  for (size_t i = 0; i < xattrs.size(); ++i)
    if (decoded[i] && !decoded_names.count(xattrs[i].first)) xattrs[i].first = std::move(*decoded[i]);
}

}  // namespace sqar
