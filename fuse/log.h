// One log line per problem: stderr in the foreground, syslog once daemonized.
#pragma once
#include <string>

namespace sqar::fuse {
void log_to_syslog(bool enable);
// Rate-limited: at most 20 lines in 10 s. The first line held back says so, and the number
// held back is logged with the next line after the window, or by log_held_back_count().
void log_error(const std::string& message);
// At unmount: the number of errors held back in the last window, if any (so a burst that
// stopped is not left unaccounted for).
void log_held_back_count();
// A line about how the mount runs (not a problem): not rate-limited.
void log_info(const std::string& message);
}  // namespace sqar::fuse
