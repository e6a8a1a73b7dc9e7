#include "log.h"

#include <syslog.h>

#include <atomic>
#include <cstdio>
#include <mutex>

namespace sqar::fuse {

namespace {
std::atomic<bool> g_syslog{false};
std::mutex g_mu;
std::string g_last;  // the kernel retries a failed read: log the same problem once
}

void log_to_syslog(bool enable) {
  if (enable) openlog("sqarfs", LOG_PID, LOG_DAEMON);
  g_syslog = enable;
}

void log_error(const std::string& message) {
  {
    std::lock_guard lock(g_mu);
    if (message == g_last) return;
    g_last = message;
  }
  if (g_syslog) {
    syslog(LOG_ERR, "%s", message.c_str());
  } else {
    fprintf(stderr, "sqarfs: %s\n", message.c_str());
  }
}

}  // namespace sqar::fuse
