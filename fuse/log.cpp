#include "log.h"

#include <syslog.h>

#include <atomic>
#include <cstdio>

namespace sqar::fuse {

namespace {
std::atomic<bool> g_syslog{false};
}

void log_to_syslog(bool enable) {
  if (enable) openlog("sqarfs", LOG_PID, LOG_DAEMON);
  g_syslog = enable;
}

void log_error(const std::string& message) {
  if (g_syslog) {
    syslog(LOG_ERR, "%s", message.c_str());
  } else {
    fprintf(stderr, "sqarfs: %s\n", message.c_str());
  }
}

}  // namespace sqar::fuse
