#include "parse_size.h"

#include <charconv>

namespace sqar {

namespace {
std::optional<unsigned> unit_shift(std::string_view unit) {
  struct Unit {
    std::string_view name;
    unsigned shift;
  };
  static constexpr Unit kUnits[] = {{"", 0},    {"B", 0},  {"K", 10},   {"k", 10},   {"KiB", 10},
                                    {"KB", 10}, {"M", 20}, {"m", 20},   {"MiB", 20}, {"MB", 20},
                                    {"G", 30},  {"g", 30}, {"GiB", 30}, {"GB", 30}};
  for (const Unit& u : kUnits)
    if (unit == u.name) return u.shift;
  return std::nullopt;
}
}  // namespace

std::optional<uint64_t> parse_size(std::string_view text) {
  // from_chars takes no sign and no blanks, unlike strtoull ("-1" would wrap around).
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  const auto shift = unit_shift(text.substr(size_t(end - text.data())));
  if (!shift) return std::nullopt;
  if (n > (UINT64_MAX >> *shift)) return std::nullopt;
  return n << *shift;
}

}  // namespace sqar
