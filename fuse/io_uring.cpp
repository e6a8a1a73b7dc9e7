#include "io_uring.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace sqar::fuse {
namespace {

int sys_setup(unsigned entries, io_uring_params* p) { return int(syscall(__NR_io_uring_setup, entries, p)); }

int sys_enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags) {
  return int(syscall(__NR_io_uring_enter, fd, to_submit, min_complete, flags, nullptr, 0));
}

template <class T>
T* at(void* base, uint32_t offset) {
  return reinterpret_cast<T*>(static_cast<uint8_t*>(base) + offset);
}

}  // namespace

IoUring::IoUring(unsigned entries, unsigned flags) : flags_(flags) {
  io_uring_params p;
  std::memset(&p, 0, sizeof p);
  p.flags = flags;
  fd_ = sys_setup(entries, &p);
  if (fd_ < 0) throw Error(std::string("io_uring_setup: ") + std::strerror(errno));
  sq_entries_ = p.sq_entries;
  sq_ring_bytes_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  cq_ring_bytes_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  const bool single = p.features & IORING_FEAT_SINGLE_MMAP;
  if (single) sq_ring_bytes_ = cq_ring_bytes_ = std::max(sq_ring_bytes_, cq_ring_bytes_);
  sq_ring_ = mmap(nullptr, sq_ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQ_RING);
  if (sq_ring_ == MAP_FAILED) {
    sq_ring_ = nullptr;
    int e = errno;
    close(fd_);
    throw Error(std::string("io_uring: mapping the submission ring: ") + std::strerror(e));
  }
  if (single) {
    cq_ring_ = sq_ring_;
  } else {
    cq_ring_ = mmap(nullptr, cq_ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_CQ_RING);
    if (cq_ring_ == MAP_FAILED) {
      cq_ring_ = nullptr;
      int e = errno;
      munmap(sq_ring_, sq_ring_bytes_);
      close(fd_);
      throw Error(std::string("io_uring: mapping the completion ring: ") + std::strerror(e));
    }
  }
  // 128-byte entries with IORING_SETUP_SQE128.
  const size_t sqe_size = (flags & IORING_SETUP_SQE128) ? 128 : 64;
  sqes_bytes_ = p.sq_entries * sqe_size;
  void* sqes = mmap(nullptr, sqes_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQES);
  if (sqes == MAP_FAILED) {
    int e = errno;
    if (cq_ring_ != sq_ring_) munmap(cq_ring_, cq_ring_bytes_);
    munmap(sq_ring_, sq_ring_bytes_);
    close(fd_);
    throw Error(std::string("io_uring: mapping the submission entries: ") + std::strerror(e));
  }
  sqes_ = static_cast<io_uring_sqe*>(sqes);
  sq_head_ = at<unsigned>(sq_ring_, p.sq_off.head);
  sq_tail_ = at<unsigned>(sq_ring_, p.sq_off.tail);
  sq_mask_ = at<unsigned>(sq_ring_, p.sq_off.ring_mask);
  sq_array_ = at<unsigned>(sq_ring_, p.sq_off.array);
  cq_head_ = at<unsigned>(cq_ring_, p.cq_off.head);
  cq_tail_ = at<unsigned>(cq_ring_, p.cq_off.tail);
  cq_mask_ = at<unsigned>(cq_ring_, p.cq_off.ring_mask);
  cqes_ = at<io_uring_cqe>(cq_ring_, p.cq_off.cqes);
  local_tail_ = *sq_tail_;
}

IoUring::~IoUring() {
  if (sqes_) munmap(sqes_, sqes_bytes_);
  if (cq_ring_ && cq_ring_ != sq_ring_) munmap(cq_ring_, cq_ring_bytes_);
  if (sq_ring_) munmap(sq_ring_, sq_ring_bytes_);
  if (fd_ >= 0) close(fd_);
}

io_uring_sqe* IoUring::next_sqe() {
  const unsigned head = __atomic_load_n(sq_head_, __ATOMIC_ACQUIRE);
  if (local_tail_ - head >= sq_entries_) return nullptr;
  const unsigned index = local_tail_ & *sq_mask_;
  const size_t sqe_size = (flags_ & IORING_SETUP_SQE128) ? 128 : 64;
  auto* sqe = reinterpret_cast<io_uring_sqe*>(reinterpret_cast<uint8_t*>(sqes_) + index * sqe_size);
  std::memset(sqe, 0, sqe_size);
  sq_array_[index] = index;
  ++local_tail_;
  return sqe;
}

int IoUring::submit(bool wait) {
  const unsigned to_submit = local_tail_ - *sq_tail_;
  __atomic_store_n(sq_tail_, local_tail_, __ATOMIC_RELEASE);
  if (to_submit == 0 && !wait) return 0;
  int r = sys_enter(fd_, to_submit, wait ? 1 : 0, wait ? IORING_ENTER_GETEVENTS : 0);
  return r < 0 ? -errno : 0;
}

}  // namespace sqar::fuse
