// A minimal io_uring for one thread, on the raw system calls (liburing is not among the
// libraries sqar builds with). Just what FUSE over io_uring needs: 128-byte submission
// entries (for IORING_OP_URING_CMD's command area), submit, and wait for completions.
#pragma once
#include <linux/io_uring.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace sqar::fuse {

class IoUring {
 public:
  // Throws sqar::Error naming the cause (io_uring disabled, too old a kernel, ...).
  IoUring(unsigned entries, unsigned flags);
  ~IoUring();
  IoUring(const IoUring&) = delete;
  IoUring& operator=(const IoUring&) = delete;

  // A zeroed 128-byte entry to fill, or null when the submission queue is full (submit first).
  io_uring_sqe* next_sqe();
  // Submits what next_sqe() handed out and, with wait, sleeps until a completion is there.
  // Returns 0 or -errno (-EINTR when a signal interrupted the wait).
  int submit(bool wait);
  // Calls f(const io_uring_cqe&) for each completion and consumes them; returns the count.
  template <class F>
  unsigned drain(F&& f) {
    unsigned head = *cq_head_, n = 0;
    const unsigned tail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
    for (; head != tail; ++head, ++n) f(cqes_[head & *cq_mask_]);
    __atomic_store_n(cq_head_, head, __ATOMIC_RELEASE);
    return n;
  }
  // The command area of a 128-byte entry (80 bytes from offset 48).
  static void* command_area(io_uring_sqe* sqe) { return reinterpret_cast<uint8_t*>(sqe) + 48; }

 private:
  int fd_ = -1;
  void* sq_ring_ = nullptr;
  void* cq_ring_ = nullptr;
  size_t sq_ring_bytes_ = 0, cq_ring_bytes_ = 0;
  io_uring_sqe* sqes_ = nullptr;
  size_t sqes_bytes_ = 0;
  unsigned* sq_head_ = nullptr;
  unsigned* sq_tail_ = nullptr;
  unsigned* sq_mask_ = nullptr;
  unsigned* sq_array_ = nullptr;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned* cq_mask_ = nullptr;
  io_uring_cqe* cqes_ = nullptr;
  unsigned sq_entries_ = 0;
  unsigned local_tail_ = 0;  // entries handed out but not yet published to the kernel
  unsigned flags_ = 0;
};

}  // namespace sqar::fuse
