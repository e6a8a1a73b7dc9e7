#include "interrupt.h"

#include <signal.h>

#include "cli_util.h"

namespace sqar::cli {
namespace {

std::atomic<bool> g_stop{false};
volatile sig_atomic_t g_signal = 0;
static_assert(std::atomic<bool>::is_always_lock_free, "the flag is set from a signal handler");

void request_stop(int sig) {
  if (g_signal == 0) g_signal = sig;
  g_stop.store(true, std::memory_order_relaxed);
  signal(sig, SIG_DFL);
}

}  // namespace

const std::atomic<bool>& stop_on_interrupt_signals() {
  // SA_RESTART: a write in progress finishes; the workers look at the flag.
  handle_signals_not_ignored({SIGINT, SIGTERM, SIGHUP}, request_stop, SA_RESTART);
  return g_stop;
}

int interrupt_signal() { return g_signal; }

void end_by_interrupt_signal() {
  const int sig = g_signal;
  if (sig == 0) return;
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace sqar::cli
