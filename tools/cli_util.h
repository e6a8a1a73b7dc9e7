// Small helpers shared by the sqar sub-commands: option values and human-readable numbers
// (byte counts: common/parse_size.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace sqar::cli {

std::optional<int64_t> parse_int(const std::string& text);
std::string human_bytes(uint64_t bytes);  // "1.2 GiB"
// "1 file", "0 files", "2 files": a count with its noun in the right number.
std::string counted(uint64_t n, const char* singular, const char* plural);
std::string json_escape(const std::string& s);

}  // namespace sqar::cli
