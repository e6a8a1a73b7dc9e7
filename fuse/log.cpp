#include "log.h"

#include <syslog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <utility>

#include "common/display_name.h"

namespace sqar::fuse {

namespace {
std::atomic<bool> g_syslog{false};
std::mutex g_mu;
std::string g_last;  // the kernel retries a failed read: log the same problem once
std::chrono::steady_clock::time_point g_window_start;
int g_logged = 0;
long g_suppressed = 0;

void write_line(int priority, const std::string& message) {
  // Messages name entries of the image, whose bytes may hold control characters.
  const std::string line = printable(message);
  if (g_syslog) {
    syslog(priority, "%s", line.c_str());
  } else {
    fprintf(stderr, "sqarfs: %s\n", line.c_str());
  }
}
}  // namespace

void log_to_syslog(bool enable) {
  if (enable) openlog("sqarfs", LOG_PID, LOG_DAEMON);
  g_syslog = enable;
}

void log_error(const std::string& message) {
  // A damaged image can fail thousands of reads a second: log at most kBurst lines per
  // kWindow, then say how many were left out, so the log stays readable and bounded.
  constexpr int kBurst = 20;
  constexpr auto kWindow = std::chrono::seconds(10);
  std::string line = message;
  {
    std::lock_guard lock(g_mu);
    if (message == g_last) return;
    g_last = message;
    const auto now = std::chrono::steady_clock::now();
    if (now - g_window_start >= kWindow) {
      if (g_suppressed) line = std::to_string(g_suppressed) + " similar errors not logged; now: " + message;
      g_window_start = now;
      g_logged = 0;
      g_suppressed = 0;
    }
    if (g_logged >= kBurst) {
      if (g_suppressed++ > 0) return;
      line = "more than 20 errors in 10 s: the rest of them are counted, not logged";
    } else {
      ++g_logged;
    }
  }
  write_line(LOG_ERR, line);
}

void log_held_back_count() {
  long held_back;
  {
    std::lock_guard lock(g_mu);
    held_back = std::exchange(g_suppressed, 0);
  }
  if (held_back) write_line(LOG_ERR, std::to_string(held_back) + " similar errors not logged");
}

void log_info(const std::string& message) { write_line(LOG_INFO, message); }

}  // namespace sqar::fuse
