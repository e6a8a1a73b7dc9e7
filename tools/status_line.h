// A one-line progress display on stderr, shared by the commands that can run for a while
// (create, extract). Shown on a terminal only, unless asked for; never mixed into stdout.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sqar::cli {

// Whether to show progress: not with --quiet, always with --progress, else when stderr is a TTY.
bool want_progress(bool quiet, bool forced);

// "[#########.....................]  30%  1.2 GiB / 4.0 GiB  310.5 MiB/s"
std::string progress_bar(uint64_t done, uint64_t total, double seconds);

// Writes one message line to stderr. While a status line is shown it is cleared first (and
// redrawn on its next tick), so errors and warnings never end up glued to the bar.
void print_message(const std::string& line);

// Redraws render(seconds since start) every 200 ms on its own thread; the destructor stops
// it and clears the line, so whatever is printed next starts on a clean line. When stderr is
// not a terminal (--progress into a log file), it writes a plain line every 2 s instead, with
// no cursor controls.
class StatusLine {
 public:
  using Render = std::function<std::string(double seconds)>;
  explicit StatusLine(Render render);
  ~StatusLine();
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

 private:
  void loop();
  Render render_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool terminal_;
  std::thread thread_;
};

}  // namespace sqar::cli
