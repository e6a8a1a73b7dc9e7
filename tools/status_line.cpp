#include "status_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "cli_util.h"
#include "common/display_name.h"

namespace sqar::cli {
namespace {
std::mutex stderr_mu;       // one writer of stderr at a time: the status line or a message
bool status_shown = false;  // a status line is on screen (without a newline)
}  // namespace

void print_message(const std::string& line) {
  std::lock_guard lk(stderr_mu);
  std::fprintf(stderr, "%s%s\n", status_shown ? "\r\033[K" : "", printable(line).c_str());
  std::fflush(stderr);
}

bool want_progress(bool quiet, bool forced) { return !quiet && (forced || isatty(STDERR_FILENO)); }

std::string progress_bar(uint64_t done, uint64_t total, double seconds) {
  const double frac = total ? std::min(1.0, double(done) / double(total)) : 1.0;
  char bar[31];
  const int fill = int(frac * 30);
  for (int i = 0; i < 30; ++i) bar[i] = i < fill ? '#' : '.';
  bar[30] = 0;
  char line[160];
  std::snprintf(line, sizeof line, "[%s] %3.0f%%  %s / %s  %s/s", bar, frac * 100, human_bytes(done).c_str(),
                human_bytes(total).c_str(), human_bytes(uint64_t(double(done) / std::max(seconds, 0.001))).c_str());
  return line;
}

StatusLine::StatusLine(Render render)
    : render_(std::move(render)), start_(std::chrono::steady_clock::now()), terminal_(isatty(STDERR_FILENO)) {
  thread_ = std::thread([this] { loop(); });
}

StatusLine::~StatusLine() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (!terminal_) return;
  std::lock_guard out(stderr_mu);
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  status_shown = false;
}

void StatusLine::loop() {
  const auto period = std::chrono::milliseconds(terminal_ ? 200 : 2000);
  std::unique_lock lk(mu_);
  while (!cv_.wait_for(lk, period, [&] { return stop_; })) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string text = render_(secs);
    std::lock_guard out(stderr_mu);
    if (terminal_) {
      // Never wider than the terminal: a line that wraps is not erased by \r, and every redraw
      // would scroll. Asked each tick, so a resized window is followed.
      winsize ws{};
      size_t width = text.size();
      if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) width = std::min(width, size_t(ws.ws_col - 1));
      std::fprintf(stderr, "\r\033[K%.*s", int(width), text.c_str());
      status_shown = true;
    } else {
      std::fprintf(stderr, "%s\n", text.c_str());
    }
    std::fflush(stderr);
  }
}

}  // namespace sqar::cli
