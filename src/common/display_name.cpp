#include "common/display_name.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace sqar {
namespace {

// Length of the well-formed UTF-8 sequence at s[i] (1 for ASCII), 0 when the bytes there are
// not one (stray continuation, overlong form, surrogate, beyond U+10FFFF, cut short).
size_t utf8_sequence(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Whether NAME can be shown as it is, eight bytes at a time: paths of a deep tree are long and
// nearly always plain ASCII, so `list` keeps the speed of writing them.
bool plain_ascii(const std::string& s, bool backslash) {
  constexpr uint64_t kOnes = 0x0101010101010101, kHighs = 0x8080808080808080;
  auto has_zero_byte = [&](uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t x;
    std::memcpy(&x, s.data() + i, 8);
    const uint64_t below_space = (x - kOnes * 0x20) & ~x & kHighs;
    if ((x & kHighs) | below_space | has_zero_byte(x ^ (kOnes * 0x7f)) |
        (backslash ? has_zero_byte(x ^ (kOnes * '\\')) : 0))
      return false;
  }
  for (; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f || (backslash && c == '\\')) return false;
  }
  return true;
}

// Whether the well-formed n-byte sequence at s[i] is a C1 control (U+0080-U+009F, which some
// terminals take as CSI) or a bidirectional formatting character (U+061C, U+200E, U+200F,
// U+202A-U+202E, U+2066-U+2069): those reorder what follows them on the line, so
// "evil\u202Etxt.exe" would show as "evilexe.txt" (CVE-2021-42574, "Trojan Source").
bool is_control_or_bidi(const std::string& s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  if (n == 2) return (b(0) == 0xC2 && b(1) < 0xA0) || (b(0) == 0xD8 && b(1) == 0x9C);
  if (n != 3 || b(0) != 0xE2) return false;
  if (b(1) == 0x80) return b(2) == 0x8E || b(2) == 0x8F || (b(2) >= 0xAA && b(2) <= 0xAE);
  return b(1) == 0x81 && b(2) >= 0xA6 && b(2) <= 0xA9;
}

std::string escape(const std::string& s, bool backslash) {
  if (plain_ascii(s, backslash)) return s;
  std::string out;
  out.reserve(s.size() + 8);
  auto octal = [&](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\%03o", c);
    out += buf;
  };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence(s, i);
      if (n == 0 || is_control_or_bidi(s, i, n)) {
        for (size_t k = 0; k < (n ? n : 1); ++k) octal(static_cast<unsigned char>(s[i + k]));
        i += n ? n : 1;
      } else {
        out.append(s, i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += backslash ? "\\\\" : "\\"; break;
      default:
        if (c < 0x20 || c == 0x7f)
          octal(c);
        else
          out += char(c);
    }
    ++i;
  }
  return out;
}

}  // namespace

std::string escape_name(const std::string& name) { return escape(name, true); }
std::string printable(const std::string& message) { return escape(message, false); }

}  // namespace sqar
