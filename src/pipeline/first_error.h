// The stages of the data pipeline run on their own threads; the first error in any of them
// stops all of them. FirstError keeps that error and wakes every stage so that none sleeps on a
// queue that will never move again.
#pragma once
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace sqar {

class FirstError {
 public:
  // Registers a stage's wake-up (it takes the stage's lock and notifies its waiters).
  void on_failure(std::function<void()> wake) {
    std::lock_guard lk(mu_);
    wakers_.push_back(std::move(wake));
  }

  // Keeps `message` if it is the first error and wakes every stage.
  void fail(const std::string& message) {
    std::vector<std::function<void()>> wakers;
    {
      std::lock_guard lk(mu_);
      if (failed_) return;
      message_ = message;
      failed_ = true;
      wakers = wakers_;
    }
    // Called without mu_: a stage may hold its own lock while it asks for the message.
    for (auto& wake : wakers) wake();
  }

  // Runs f, turning an exception into fail(): the body of every stage thread.
  template <class F>
  void guard(F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }

  bool failed() const { return failed_.load(); }

  void throw_if_failed() const {
    if (!failed_) return;
    std::lock_guard lk(mu_);
    throw Error(message_);
  }

 private:
  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::string message_;
  std::vector<std::function<void()>> wakers_;
};

}  // namespace sqar
