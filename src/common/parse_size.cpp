#include "parse_size.h"

#include <cctype>
#include <charconv>
#include <string>

namespace sqar {

namespace {
std::optional<unsigned> unit_shift(std::string_view unit) {
  // Any case, as users type them (4k, 128KB, 1MiB, 2gb); every unit is a power of 1024.
  std::string lower(unit);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  struct Unit {
    std::string_view name;
    unsigned shift;
  };
  static constexpr Unit kUnits[] = {{"", 0},     {"b", 0},   {"k", 10}, {"kib", 10}, {"kb", 10}, {"m", 20},
                                    {"mib", 20}, {"mb", 20}, {"g", 30}, {"gib", 30}, {"gb", 30}};
  for (const Unit& u : kUnits)
    if (lower == u.name) return u.shift;
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
