// How the read commands print entries: `ls -l`-style mode strings, owner names, times.
#pragma once
#include <cstdint>
#include <string>

namespace sqar::ops {

// "drwxr-xr-x", "-rwsr-xr-x", "crw-rw-rw-" ... from a full st_mode.
std::string mode_string(uint32_t mode);
// User / group name for an id, or the number when unknown (looked up once per id).
std::string user_name(uint32_t uid);
std::string group_name(uint32_t gid);
// "2024-01-31 12:34" in local time, like tar -tv.
std::string format_mtime(uint32_t seconds);
// "2024-01-31 12:34:56" in local time: to the second, where two times are compared.
std::string format_mtime_seconds(uint32_t seconds);
// Octal permission bits including set-id and sticky: "0644", "4755".
std::string octal_mode(uint32_t mode);

}  // namespace sqar::ops
