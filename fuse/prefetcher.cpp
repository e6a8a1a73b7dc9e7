#include "prefetcher.h"

namespace sqar::fuse {

void Prefetcher::start(unsigned threads) {
  std::lock_guard lock(mu_);
  stopping_ = false;
  for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
}

void Prefetcher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

bool Prefetcher::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (workers_.empty() || stopping_ || queue_.size() >= max_queue_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void Prefetcher::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace sqar::fuse
