#include "request_loop.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
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
// When the calling thread began its current request, for yield_listener_role_if_slow().
thread_local int64_t t_request_start_ns = 0;
// A request that has run this long hands listening on at its next metadata block to read. A
// walk's requests read one or two blocks each and finish well within it; handing on at every
// metadata miss made a cold walk of ports 15% slower (2.57 -> 2.95 s, medians of 7), while a
// SEEK_DATA over a 2^25-word block list, a second of metadata, held every other client up.
constexpr int64_t kSlowRequestNs = 1'000'000;

// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

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
  void worker(unsigned group, int cpu);
  // Called by the listener of `group`: the next request (>0), or 0 when the loop is over.
  int next_request(fuse_buf& buf, unsigned group);
  // After a sleep: the gap between the new request and the one before it.
  void adapt_spin(int64_t gap_ns);
  // Notes which client thread sent the request; two taking turns open the other groups.
  void note_client(const fuse_buf& buf, int64_t now);
  bool several_clients(int64_t now) const { return now < several_until_ns_.load(std::memory_order_relaxed); }
  // An extra group's listener with nothing to take: sleeps until the epoch moves on from
  // `seen` (the next call) or the loop ends. Returns false when the loop is over.
  bool sleep_until_called(uint32_t seen);
  void announce_exit();

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
  std::atomic<int64_t> last_request_ns_{0};

  // Listener groups (request_loop.h). Group 0 listens always. While several client threads
  // take turns sending requests, one more group per CPU (up to threads / 2) listens too,
  // pinned to its CPU: a client that blocks on CPU c is answered by the listener that then
  // runs on c, and the reply wakes it on a CPU that never went idle. For a single client the
  // extra listeners would only take CPU from it, so they wait until a second client thread
  // shows up (FUSE names the sender of each request) and sleep again kSeveralClientsHoldNs
  // after the clients stop taking turns. An extra listener that gets no request for
  // kExtraIdleNs sleeps until the next call (every kRecallNs while the clients go on), in case
  // a client moved to its CPU. Numbers: docs/architecture.md, "One listener group per CPU".
  // Groups form only when every allowed CPU gets one (threads >= 2 per CPU, the default up
  // to 8 CPUs): pinning 16 threads to 8 of 64 CPUs would confine their decompression.
  static constexpr int64_t kSeveralClientsHoldNs = 10'000'000;
  static constexpr int64_t kExtraIdleNs = 1'000'000;
  static constexpr int64_t kRecallNs = 10'000'000;
  struct Group {
    std::mutex listen_mu;  // held by the one thread of the group that reads /dev/fuse
  };
  std::vector<Group> groups_;
  std::atomic<uint32_t> last_client_{0};  // thread id of the last request's sender
  std::atomic<int64_t> several_until_ns_{0};
  std::atomic<uint32_t> several_epoch_{0};  // bumped to call the extra groups' listeners
  std::atomic<int64_t> last_call_ns_{0};
  std::atomic<bool> exiting_{false};
};

int RequestLoop::run(unsigned threads) {
  exit_fd_ = eventfd(0, EFD_CLOEXEC);
  if (exit_fd_ < 0) {
    log_error(std::string("cannot create an eventfd: ") + strerror(errno));
    return 1;
  }
  // O_NONBLOCK on /dev/fuse's file description: reads return EAGAIN instead of sleeping,
  // so the listener can spin; it sleeps in poll() instead.
  int flags = fcntl(fd_, F_GETFL);
  if (flags < 0 || fcntl(fd_, F_SETFL, flags | O_NONBLOCK) != 0) {
    log_error(std::string("cannot make /dev/fuse non-blocking: ") + strerror(errno));
    return 1;
  }
  // Signals go to this thread only (libfuse's handlers just set fuse_session_exited);
  // it then wakes the listener. Workers start with every signal blocked.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  // Groups of at least two threads (a listener and one to take over during slow requests),
  // one per allowed CPU; a single unpinned group on one CPU or with fewer threads than that.
  const std::vector<int> cpus = allowed_cpus();
  const size_t ngroups = cpus.size() > 1 && threads / 2 >= cpus.size() ? cpus.size() : 1;
  groups_ = std::vector<Group>(ngroups);
  std::vector<std::thread> pool;
  try {
    for (unsigned i = 0; i < threads; ++i) {
      const unsigned group = unsigned(i % ngroups);
      const int cpu = ngroups > 1 ? cpus[group] : -1;
      pool.emplace_back([this, group, cpu] { worker(group, cpu); });
    }
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

void RequestLoop::announce_exit() {
  uint64_t one = 1;
  ssize_t r = write(exit_fd_, &one, sizeof one);
  (void)r;  // the counter cannot overflow with a handful of writes
  exiting_.store(true);
  several_epoch_.fetch_add(1);
  several_epoch_.notify_all();
}

void RequestLoop::worker(unsigned group, int cpu) {
  if (cpu >= 0) {
    // A hint: if it fails (a cpuset changed meanwhile), the group listens unpinned.
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  fuse_buf buf{};  // libfuse allocates the buffer on the first receive
  std::unique_lock lock(groups_[group].listen_mu, std::defer_lock);
  t_listener_lock = &lock;
  for (;;) {
    if (!lock.owns_lock()) lock.lock();
    if (next_request(buf, group) <= 0) break;
    // A request that turns out slow (a block to decompress) gives the role up itself
    // (yield_listener_role); see request_loop.h for handing it on when others wait.
    if (handoff_on_queue_ && more_queued()) lock.unlock();
    fuse_session_process_buf(se_, &buf);
  }
  t_listener_lock = nullptr;
  // Unmounted or signalled: the main thread wakes up; the next listener sees it at once.
  fuse_session_exit(se_);
  announce_exit();
  free(buf.mem);
}

int RequestLoop::next_request(fuse_buf& buf, unsigned group) {
  bool slept = false;
  int64_t give_up_ns = now_ns() + kExtraIdleNs;  // extra groups: stop polling after this
  for (;;) {
    if (fuse_session_exited(se_) || exiting_.load(std::memory_order_relaxed)) return 0;
    if (group > 0) {
      const uint32_t epoch = several_epoch_.load();
      const int64_t now = now_ns();
      if (!several_clients(now) || now > give_up_ns) {
        if (!sleep_until_called(epoch)) return 0;
        give_up_ns = now_ns() + kExtraIdleNs;
        continue;
      }
    }
    int r = fuse_session_receive_buf(se_, &buf);
    if (r > 0) {
      int64_t now = now_ns();
      t_request_start_ns = now;  // for yield_listener_role_if_slow(), without a second clock read
      int64_t gap = now - last_request_ns_.exchange(now, std::memory_order_relaxed);
      if (slept && group == 0) adapt_spin(gap);
      note_client(buf, now);
      return r;
    }
    if (r == 0) return 0;  // ENODEV: unmounted (libfuse then sets fuse_session_exited)
    if (r == -EINTR) continue;
    if (r != -EAGAIN) {
      log_error(std::string("reading /dev/fuse: ") + strerror(-r));
      return 0;
    }
    // The extra groups keep polling while several clients are about and requests come their
    // way (the check above ends it); group 0 for the adaptive window after the last request.
    if (group > 0 ||
        now_ns() - last_request_ns_.load(std::memory_order_relaxed) < spin_ns_.load(std::memory_order_relaxed)) {
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

void RequestLoop::note_client(const fuse_buf& buf, int64_t now) {
  if (groups_.size() < 2 || (buf.flags & FUSE_BUF_IS_FD) || buf.size < sizeof(fuse_in_header)) return;
  uint32_t pid;
  std::memcpy(&pid, static_cast<const char*>(buf.mem) + offsetof(fuse_in_header, pid), sizeof pid);
  if (pid == 0) return;  // sent by the kernel itself (FORGET, INTERRUPT)
  const uint32_t before = last_client_.exchange(pid, std::memory_order_relaxed);
  if (before == 0 || before == pid) return;
  const bool were_waiting = !several_clients(now);
  several_until_ns_.store(now + kSeveralClientsHoldNs, std::memory_order_relaxed);
  if (were_waiting || now - last_call_ns_.load(std::memory_order_relaxed) >= kRecallNs) {
    last_call_ns_.store(now, std::memory_order_relaxed);
    several_epoch_.fetch_add(1);
    several_epoch_.notify_all();
  }
}

bool RequestLoop::sleep_until_called(uint32_t seen) {
  if (exiting_.load()) return false;
  several_epoch_.wait(seen);
  return !exiting_.load();
}

bool RequestLoop::more_queued() const {
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

}  // namespace

void yield_listener_role() {
  if (t_listener_lock && t_listener_lock->owns_lock()) t_listener_lock->unlock();
}

void yield_listener_role_if_slow() {
  if (t_listener_lock && t_listener_lock->owns_lock() && now_ns() - t_request_start_ns > kSlowRequestNs)
    t_listener_lock->unlock();
}

int run_request_loop(fuse_session* se, unsigned threads, std::chrono::microseconds spin, bool handoff_on_queue) {
  RequestLoop loop(se, spin, handoff_on_queue);
  return loop.run(threads == 0 ? 1 : threads);
}

}  // namespace sqar::fuse
