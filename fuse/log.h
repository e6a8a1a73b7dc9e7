// One log line per problem: stderr in the foreground, syslog once daemonized.
#pragma once
#include <string>

namespace sqar::fuse {
void log_to_syslog(bool enable);
void log_error(const std::string& message);
// A line about how the mount runs (not a problem): not rate-limited.
void log_info(const std::string& message);
}  // namespace sqar::fuse
