// A small pool that decompresses data blocks ahead of sequential readers.
//
// Requests are hints: when the queue is full they are dropped rather than delaying the
// reader. Threads start in start(), after the daemon has forked (fork keeps only the
// calling thread).
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sqar::fuse {

class Prefetcher {
 public:
  explicit Prefetcher(size_t max_queue = 64) : max_queue_(max_queue) {}
  ~Prefetcher() { stop(); }
  void start(unsigned threads);
  void stop();
  // Returns false when dropped (queue full or pool not running).
  bool submit(std::function<void()> task);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> workers_;
  size_t max_queue_;
  bool stopping_ = false;
};

}  // namespace sqar::fuse
