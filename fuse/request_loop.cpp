#include "request_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "log.h"

namespace sqar::fuse {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The listener's lock, for yield_listener_role(); null outside request threads.
thread_local std::unique_lock<std::mutex>* t_listener_lock = nullptr;

class RequestLoop {
 public:
  RequestLoop(fuse_session* se, std::chrono::microseconds spin, bool handoff_on_queue)
      : se_(se),
        handoff_on_queue_(handoff_on_queue),
        fd_(fuse_session_fd(se)),
        max_spin_ns_(std::chrono::nanoseconds(spin).count()),
        spin_ns_(max_spin_ns_) {}
  ~RequestLoop() {
    if (exit_fd_ >= 0) close(exit_fd_);
  }
  int run(unsigned threads);

 private:
  void worker();
  // Called by the listener: the next request (>0), or 0 when the loop is over.
  int next_request(fuse_buf& buf);
  // After a sleep: the gap between the new request and the one before it.
  void adapt_spin(int64_t gap_ns);
  void announce_exit() const;

  bool more_queued() const;

  fuse_session* se_;
  const bool handoff_on_queue_;
  int fd_;
  int exit_fd_ = -1;  // eventfd, readable once the loop must end: wakes the listener's poll
  // The spin adapts, as the kernel's haltpoll does: after sleeping, a request that came
  // within max_spin_ns_ of the previous one doubles the window (spinning would have caught
  // it); a longer gap halves it. A client that asks every few hundred microseconds thus
  // stops the spinning instead of costing a core of polls that never find anything.
  static constexpr int64_t kMinSpinNs = 10'000;
  const int64_t max_spin_ns_;
  std::atomic<int64_t> spin_ns_;
  std::mutex listen_mu_;  // held by the one thread that reads /dev/fuse
  std::atomic<int64_t> last_request_ns_{0};
};

int RequestLoop::run(unsigned threads) {
  exit_fd_ = eventfd(0, EFD_CLOEXEC);
  if (exit_fd_ < 0) {
    log_error(std::string("cannot create an eventfd: ") + strerror(errno));
    return 1;
  }
  // O_NONBLOCK on the session's file description: reads return EAGAIN instead of sleeping,
  // so the listener can spin; it sleeps in poll() instead.
  int flags = fcntl(fd_, F_GETFL);
  if (flags < 0 || fcntl(fd_, F_SETFL, flags | O_NONBLOCK) != 0) {
    log_error(std::string("cannot make /dev/fuse non-blocking: ") + strerror(errno));
    return 1;
  }
  // Signals go to this thread only (libfuse's handlers just flag the session as exited);
  // it then wakes the listener. Workers start with every signal blocked.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  std::vector<std::thread> pool;
  try {
    for (unsigned i = 0; i < threads; ++i) pool.emplace_back([this] { worker(); });
  } catch (const std::system_error& e) {
    log_error(std::string("cannot start request threads: ") + e.what());
    fuse_session_exit(se_);
  }
  // ppoll unblocks the signals only while it waits, so a signal that arrives between the
  // check and the wait still interrupts it.
  while (!fuse_session_exited(se_)) {
    pollfd p{exit_fd_, POLLIN, 0};
    ppoll(&p, 1, nullptr, &old);
  }
  announce_exit();
  for (auto& t : pool) t.join();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return pool.size() == threads ? 0 : 1;
}

void RequestLoop::announce_exit() const {
  uint64_t one = 1;
  ssize_t r = write(exit_fd_, &one, sizeof one);
  (void)r;  // the counter cannot overflow with a handful of writes
}

void RequestLoop::worker() {
  fuse_buf buf{};  // libfuse allocates the buffer on the first receive
  std::unique_lock lock(listen_mu_, std::defer_lock);
  t_listener_lock = &lock;
  for (;;) {
    if (!lock.owns_lock()) lock.lock();
    if (next_request(buf) <= 0) break;
    // A request that turns out slow (a block to decompress) gives the role up itself
    // (yield_listener_role); see request_loop.h for handing it on when others wait.
    if (handoff_on_queue_ && more_queued()) lock.unlock();
    fuse_session_process_buf(se_, &buf);
  }
  t_listener_lock = nullptr;
  // Session over: the main thread wakes up; the next listener sees it at once.
  fuse_session_exit(se_);
  announce_exit();
  free(buf.mem);
}

int RequestLoop::next_request(fuse_buf& buf) {
  bool slept = false;
  for (;;) {
    if (fuse_session_exited(se_)) return 0;
    int r = fuse_session_receive_buf(se_, &buf);
    if (r > 0) {
      int64_t now = now_ns();
      int64_t gap = now - last_request_ns_.exchange(now, std::memory_order_relaxed);
      if (slept) adapt_spin(gap);
      return r;
    }
    if (r == 0) return 0;  // ENODEV: unmounted (libfuse marks the session exited)
    if (r == -EINTR) continue;
    if (r != -EAGAIN) {
      log_error(std::string("reading /dev/fuse: ") + strerror(-r));
      return 0;
    }
    if (now_ns() - last_request_ns_.load(std::memory_order_relaxed) < spin_ns_.load(std::memory_order_relaxed)) {
      // Spin politely: a client thread that is runnable on this core goes first.
      sched_yield();
      continue;
    }
    pollfd fds[2] = {{fd_, POLLIN, 0}, {exit_fd_, POLLIN, 0}};
    poll(fds, 2, -1);  // wakes for a request, an unmount (POLLERR) or the exit event
    slept = true;
  }
}

void RequestLoop::adapt_spin(int64_t gap_ns) {
  int64_t w = spin_ns_.load(std::memory_order_relaxed);
  if (gap_ns <= max_spin_ns_)
    w = std::min(max_spin_ns_, std::max(2 * w, kMinSpinNs));
  else
    w = w / 2 < kMinSpinNs ? 0 : w / 2;
  spin_ns_.store(w, std::memory_order_relaxed);
}

bool RequestLoop::more_queued() const {
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

}  // namespace

void yield_listener_role() {
  if (t_listener_lock && t_listener_lock->owns_lock()) t_listener_lock->unlock();
}

int run_request_loop(fuse_session* se, unsigned threads, std::chrono::microseconds spin, bool handoff_on_queue) {
  RequestLoop loop(se, spin, handoff_on_queue);
  return loop.run(threads == 0 ? 1 : threads);
}

}  // namespace sqar::fuse
