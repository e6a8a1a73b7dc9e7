#include "uring_transport.h"

#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "io_uring.h"
#include "log.h"

namespace sqar::fuse {
namespace {

// The FUSE-over-io_uring part of the kernel ABI (include/uapi/linux/fuse.h, protocol 7.42),
// which Debian 12's headers predate.
constexpr uint64_t kFuseOverIoUring = 1ull << 41;  // INIT flag: flags2 bit 9
constexpr uint32_t kInitExt = 1u << 30;            // INIT flag: flags2 is valid
constexpr uint32_t kCmdRegister = 1;
constexpr uint32_t kCmdCommitAndFetch = 2;

// What the kernel reads and writes per ring entry, besides the payload buffer.
struct EntryInOut {
  uint64_t flags;
  uint64_t commit_id;  // the request's unique id: names the entry when committing
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};
struct RequestHeaders {
  uint8_t in_out[128];  // fuse_in_header of a request, fuse_out_header of its reply
  uint8_t op_in[128];   // the request's first argument (its fixed-size part)
  EntryInOut entry;
};
// The 80-byte command area of a 128-byte submission entry.
struct RingCommand {
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
static_assert(sizeof(RingCommand) <= 80);

constexpr unsigned kEntriesPerQueue = 8;
constexpr uint64_t kExitEvent = 0;  // user_data of the exit eventfd's poll

// One ring entry: a request in flight between the kernel and the thread of its queue.
struct RingEntry {
  RequestHeaders* headers = nullptr;
  uint8_t* payload = nullptr;
  size_t payload_size = 0;
  iovec iov[2];
  uint64_t unique = 0;  // of the request being served
  uint32_t opcode = 0;
  bool replied = false;
  std::vector<uint8_t> request;  // the request in /dev/fuse form, for libfuse
  ~RingEntry() {
    std::free(headers);
    std::free(payload);
  }
};

// The entry the calling thread is serving: its reply goes into the entry, not to /dev/fuse.
thread_local RingEntry* t_entry = nullptr;

// Page-aligned and untouched: the payload buffers are sized for the largest request (1 MiB
// with libfuse's max_write), but only the pages requests and replies use become resident.
void* page_aligned(size_t bytes) {
  void* p = std::aligned_alloc(4096, (bytes + 4095) & ~size_t(4095));
  if (!p) throw std::bad_alloc();
  return p;
}

unsigned possible_cpus() {
  // The kernel makes a queue per possible CPU (nr_cpu_ids), online or not: "0-1", "0-3,8".
  std::ifstream f("/sys/devices/system/cpu/possible");
  std::string s;
  unsigned highest = 0;
  if (f >> s) {
    for (size_t i = 0; i < s.size();) {
      size_t j = i;
      while (j < s.size() && s[j] != ',') ++j;
      std::string part = s.substr(i, j - i);
      size_t dash = part.find('-');
      highest = std::max(highest, unsigned(std::strtoul(part.c_str() + (dash == std::string::npos ? 0 : dash + 1), nullptr, 10)));
      i = j + 1;
    }
    return highest + 1;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

class Transport final : public UringTransport {
 public:
  Transport(fuse_session* se, UringMode mode) : se_(se), mode_(mode), fd_(fuse_session_fd(se)) {}
  ~Transport() override { stop(); }
  void stop() override;
  bool active() const override { return serving_.load(); }
  size_t queues_count() const { return queue_count_.load(); }

  static ssize_t io_read(int fd, void* buf, size_t len, void*);
  static ssize_t io_writev(int fd, iovec* iov, int count, void*);
  // The hooks are plain functions: they find the transport here (one session per process).
  static std::atomic<Transport*> instance;

 private:
  void note_init_request(const fuse_in_header& h, const uint8_t* arg, size_t arg_len);
  ssize_t write_init_reply(int fd, iovec* iov, int count);
  // One ring queue: its io_uring, entries and thread, all made before the INIT reply asks
  // for io_uring (see write_init_reply).
  struct Queue {
    unsigned qid = 0;
    int exit_fd = -1;  // eventfd: readable when the thread must end
    std::unique_ptr<IoUring> ring;
    std::vector<std::unique_ptr<RingEntry>> entries;
    std::thread thread;
    ~Queue() {
      if (exit_fd >= 0) close(exit_fd);
    }
  };
  enum class Start { waiting, go, cancel };
  bool prepare_queues();
  void release_queues(Start how);
  void serve_queue(Queue& q);
  void register_entries(Queue& q);
  void serve(RingEntry& e);
  static void capture_reply(RingEntry& e, const iovec* iov, int count);

  fuse_session* se_;
  const UringMode mode_;
  const int fd_;
  // INIT: its request id and whether the kernel offered io_uring (set by the thread that
  // reads INIT, read by the one that writes its reply: the same thread in practice).
  std::atomic<uint64_t> init_unique_{0};
  std::atomic<bool> offered_{false};
  size_t payload_size_ = 0;
  std::mutex mu_;
  std::condition_variable start_cv_;
  Start start_ = Start::waiting;
  bool stopped_ = false;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::atomic<bool> serving_{false};
  std::atomic<size_t> queue_count_{0};
};

std::atomic<Transport*> Transport::instance{nullptr};

ssize_t Transport::io_read(int fd, void* buf, size_t len, void*) {
  ssize_t r = read(fd, buf, len);
  if (r >= ssize_t(sizeof(fuse_in_header))) {
    const auto* h = static_cast<const fuse_in_header*>(buf);
    Transport* t = instance.load();
    if (h->opcode == FUSE_INIT && t)
      t->note_init_request(*h, static_cast<const uint8_t*>(buf) + sizeof *h, size_t(r) - sizeof *h);
  }
  return r;
}

void Transport::note_init_request(const fuse_in_header& h, const uint8_t* arg, size_t arg_len) {
  fuse_init_in in;
  std::memset(&in, 0, sizeof in);
  std::memcpy(&in, arg, std::min(arg_len, sizeof in));
  const uint64_t flags = in.flags | ((in.flags & kInitExt) && arg_len >= offsetof(fuse_init_in, flags2) + 4
                                         ? uint64_t(in.flags2) << 32
                                         : 0);
  offered_ = (flags & kFuseOverIoUring) != 0;
  init_unique_ = h.unique;
  if (mode_ == UringMode::on && !offered_)
    log_error("io_uring: the kernel does not offer FUSE over io_uring (" + uring_unavailable_reason() +
              "); serving through /dev/fuse");
}

ssize_t Transport::io_writev(int fd, iovec* iov, int count, void*) {
  if (count >= 1 && iov[0].iov_len >= sizeof(fuse_out_header)) {
    const auto* out = static_cast<const fuse_out_header*>(iov[0].iov_base);
    RingEntry* e = t_entry;
    if (e && out->unique == e->unique && !e->replied) {
      capture_reply(*e, iov, count);
      return out->len;
    }
    Transport* t = instance.load();
    if (t && out->unique != 0 && out->unique == t->init_unique_.load()) return t->write_init_reply(fd, iov, count);
  }
  return writev(fd, iov, count);
}

ssize_t Transport::write_init_reply(int fd, iovec* iov, int count) {
  init_unique_ = 0;
  const auto* out = static_cast<const fuse_out_header*>(iov[0].iov_base);
  if (!offered_ || out->error != 0 || count != 2 || iov[1].iov_len < offsetof(fuse_init_out, flags2) + 4 ||
      iov[1].iov_len > sizeof(fuse_init_out))
    return writev(fd, iov, count);
  fuse_init_out reply;
  std::memset(&reply, 0, sizeof reply);
  std::memcpy(&reply, iov[1].iov_base, iov[1].iov_len);
  // The kernel sizes its ring payload from these (max_write, max_pages pages).
  payload_size_ = std::max<size_t>({size_t(8192), size_t(reply.max_write), size_t(reply.max_pages) * 4096});
  // Once the reply asks for io_uring, every request waits until all queues are registered:
  // so everything that can fail (io_uring refused by io_uring_disabled or seccomp, memory,
  // threads) happens before, and on failure the reply does not ask.
  if (!prepare_queues()) return writev(fd, iov, count);
  reply.flags |= kInitExt;
  reply.flags2 |= uint32_t(kFuseOverIoUring >> 32);
  iovec patched[2] = {iov[0], {&reply, iov[1].iov_len}};
  ssize_t r = writev(fd, patched, 2);
  release_queues(r >= 0 ? Start::go : Start::cancel);
  return r;
}

bool Transport::prepare_queues() {
  {
    std::lock_guard lock(mu_);
    if (stopped_ || !queues_.empty()) return false;
  }
  std::vector<std::unique_ptr<Queue>> made;
  try {
    const unsigned count = possible_cpus();
    for (unsigned qid = 0; qid < count; ++qid) {
      auto q = std::make_unique<Queue>();
      q->qid = qid;
      q->exit_fd = eventfd(0, EFD_CLOEXEC);
      if (q->exit_fd < 0) throw Error(std::string("eventfd: ") + std::strerror(errno));
      q->ring = std::make_unique<IoUring>(2 * kEntriesPerQueue + 2, IORING_SETUP_SQE128);
      for (unsigned i = 0; i < kEntriesPerQueue; ++i) {
        auto e = std::make_unique<RingEntry>();
        e->headers = static_cast<RequestHeaders*>(page_aligned(sizeof(RequestHeaders)));
        std::memset(e->headers, 0, sizeof(RequestHeaders));
        e->payload = static_cast<uint8_t*>(page_aligned(payload_size_));
        e->payload_size = payload_size_;
        e->iov[0] = {e->headers, sizeof(RequestHeaders)};
        e->iov[1] = {e->payload, payload_size_};
        q->entries.push_back(std::move(e));
      }
      made.push_back(std::move(q));
    }
    for (auto& q : made) q->thread = std::thread([this, &q = *q] { serve_queue(q); });
    std::lock_guard lock(mu_);
    if (!stopped_) {
      queue_count_ = made.size();
      queues_ = std::move(made);
      return true;
    }
  } catch (const std::exception& e) {
    const std::string why = std::string("io_uring: ") + e.what() + "; serving through /dev/fuse";
    if (mode_ == UringMode::on) log_error(why);
    else log_info(why);
  }
  // Undo: the threads started so far end before they register anything.
  release_queues(Start::cancel);
  for (auto& q : made)
    if (q->thread.joinable()) q->thread.join();
  return false;
}

void Transport::release_queues(Start how) {
  {
    std::lock_guard lock(mu_);
    start_ = how;
  }
  start_cv_.notify_all();
}

void Transport::stop() {
  std::vector<std::unique_ptr<Queue>> queues;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    if (start_ == Start::waiting) start_ = Start::cancel;
    queues.swap(queues_);
  }
  start_cv_.notify_all();
  for (auto& q : queues) {
    uint64_t one = 1;
    ssize_t r = write(q->exit_fd, &one, sizeof one);
    (void)r;
  }
  for (auto& q : queues)
    if (q->thread.joinable()) q->thread.join();
  Transport* self = this;
  instance.compare_exchange_strong(self, nullptr);
}

void Transport::register_entries(Queue& q) {
  for (auto& e : q.entries) {
    io_uring_sqe* sqe = q.ring->next_sqe();
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = fd_;
    sqe->cmd_op = kCmdRegister;
    sqe->addr = reinterpret_cast<uint64_t>(e->iov);
    sqe->len = 2;
    sqe->user_data = reinterpret_cast<uint64_t>(e.get());
    static_cast<RingCommand*>(IoUring::command_area(sqe))->qid = uint16_t(q.qid);
  }
  io_uring_sqe* sqe = q.ring->next_sqe();
  sqe->opcode = IORING_OP_POLL_ADD;
  sqe->fd = q.exit_fd;
  sqe->poll32_events = POLLIN;
  sqe->user_data = kExitEvent;
}

void Transport::serve_queue(Queue& q) {
  // The kernel queues a request on the queue of the CPU its client runs on: answering from
  // that CPU keeps the hand-off local.
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(q.qid, &set);
  sched_setaffinity(0, sizeof set, &set);  // an offline CPU: stay unpinned
  {
    std::unique_lock lock(mu_);
    start_cv_.wait(lock, [&] { return start_ != Start::waiting; });
    if (start_ == Start::cancel) return;
  }
  register_entries(q);
  IoUring& ring = *q.ring;
  const std::string name = "io_uring: queue " + std::to_string(q.qid) + ": ";
  std::vector<RingEntry*> ready;
  for (bool running = true; running;) {
    int r = ring.submit(true);
    if (r == -EINTR) continue;
    if (r < 0) {
      log_error(name + std::strerror(-r));
      break;
    }
    ready.clear();
    ring.drain([&](const io_uring_cqe& cqe) {
      if (cqe.user_data == kExitEvent) {
        running = false;
      } else if (cqe.res < 0) {
        // ENOTCONN/ECANCELED/ENODEV: the connection ended (unmount). Anything else is a
        // refused registration: the kernel then stays on /dev/fuse.
        if (cqe.res != -ENOTCONN && cqe.res != -ECANCELED && cqe.res != -ENODEV)
          log_error(name + std::strerror(-cqe.res));
        running = false;
      } else {
        ready.push_back(reinterpret_cast<RingEntry*>(cqe.user_data));
      }
    });
    // Requests delivered in the same batch as the end are still answered: an entry holding
    // an unanswered request keeps its client waiting and the unmount with it.
    for (RingEntry* e : ready) {
      if (!serving_.exchange(true))
        log_info("serving requests through io_uring (" + std::to_string(queues_count()) + " queues)");
      serve(*e);
      io_uring_sqe* c = ring.next_sqe();  // never full: one command per entry, plus the poll
      c->opcode = IORING_OP_URING_CMD;
      c->fd = fd_;
      c->cmd_op = kCmdCommitAndFetch;
      c->user_data = reinterpret_cast<uint64_t>(e);
      auto* cmd = static_cast<RingCommand*>(IoUring::command_area(c));
      cmd->qid = uint16_t(q.qid);
      cmd->commit_id = e->unique;
    }
    if (!running && !ready.empty()) ring.submit(false);
  }
}

// Rebuilds the request as /dev/fuse delivers it (header, first argument, the rest) and lets
// libfuse dispatch it; the reply comes back through io_writev into the entry.
void Transport::serve(RingEntry& e) {
  fuse_in_header in;
  std::memcpy(&in, e.headers->in_out, sizeof in);
  const size_t payload_len = e.headers->entry.payload_sz;
  e.unique = in.unique;
  e.opcode = in.opcode;
  e.replied = false;
  const size_t rest = in.len >= sizeof in ? in.len - sizeof in : 0;
  if (in.len < sizeof in || payload_len > rest || payload_len > e.payload_size ||
      rest - payload_len > sizeof e.headers->op_in) {
    log_error("io_uring: malformed request (opcode " + std::to_string(in.opcode) + ", length " +
              std::to_string(in.len) + ")");
    fuse_out_header out{sizeof(fuse_out_header), -EIO, in.unique};
    iovec iov{&out, sizeof out};
    capture_reply(e, &iov, 1);
    return;
  }
  const size_t op_len = rest - payload_len;
  e.request.resize(in.len);
  std::memcpy(e.request.data(), &in, sizeof in);
  std::memcpy(e.request.data() + sizeof in, e.headers->op_in, op_len);
  std::memcpy(e.request.data() + sizeof in + op_len, e.payload, payload_len);
  fuse_buf buf{};
  buf.mem = e.request.data();
  buf.size = e.request.size();
  t_entry = &e;
  fuse_session_process_buf(se_, &buf);
  t_entry = nullptr;
  if (!e.replied) {
    // Every operation replies before it returns; the kernel still needs an answer.
    fuse_out_header out{sizeof(fuse_out_header), -EIO, in.unique};
    iovec iov{&out, sizeof out};
    capture_reply(e, &iov, 1);
  }
}

void Transport::capture_reply(RingEntry& e, const iovec* iov, int count) {
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof out);
  size_t n = 0;
  for (int i = 1; i < count; ++i) {
    if (n + iov[i].iov_len > e.payload_size) {
      log_error("io_uring: the reply to a request of opcode " + std::to_string(e.opcode) +
                " does not fit the ring buffer (" + std::to_string(e.payload_size) + " bytes)");
      out.error = -EIO;
      n = 0;
      break;
    }
    std::memcpy(e.payload + n, iov[i].iov_base, iov[i].iov_len);
    n += iov[i].iov_len;
  }
  out.len = uint32_t(sizeof out + n);
  std::memcpy(e.headers->in_out, &out, sizeof out);
  e.headers->entry.payload_sz = uint32_t(n);
  e.replied = true;
}

}  // namespace

std::string uring_unavailable_reason() {
  std::ifstream f("/sys/module/fuse/parameters/enable_uring");
  std::string v;
  if (!(f >> v)) return "this kernel has no FUSE over io_uring (6.14+ with CONFIG_FUSE_IO_URING)";
  if (v != "Y" && v != "1") return "/sys/module/fuse/parameters/enable_uring is N";
  return "";
}

std::unique_ptr<UringTransport> install_uring_transport(fuse_session* se, UringMode mode) {
  if (mode == UringMode::off) return nullptr;
  auto t = std::make_unique<Transport>(se, mode);
  fuse_custom_io io{};
  io.read = &Transport::io_read;
  io.writev = &Transport::io_writev;
  Transport::instance = t.get();
  if (fuse_session_custom_io(se, &io, fuse_session_fd(se)) != 0) {
    Transport::instance = nullptr;
    log_error("io_uring: libfuse refused the custom I/O hooks; serving through /dev/fuse");
    return nullptr;
  }
  return t;
}

}  // namespace sqar::fuse
