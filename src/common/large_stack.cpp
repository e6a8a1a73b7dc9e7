#include "common/large_stack.h"

#include <pthread.h>

#include <cstring>
#include <exception>

#include "common/error.h"

namespace sqar {
namespace {

struct Call {
  const std::function<void()>* fn;
  std::exception_ptr error;
};

void* run_call(void* arg) {
  Call* call = static_cast<Call*>(arg);
  try {
    (*call->fn)();
  } catch (...) {
    call->error = std::current_exception();
  }
  return nullptr;
}

}  // namespace

void run_with_stack(size_t bytes, const std::function<void()>& fn) {
  constexpr size_t kMargin = 1 << 20;  // for the frames of the call itself
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  int rc = pthread_attr_setstacksize(&attr, bytes + kMargin);
  Call call{&fn, nullptr};
  pthread_t thread;
  if (rc == 0) rc = pthread_create(&thread, &attr, run_call, &call);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    throw Error("cannot start a thread with a stack of " + std::to_string(bytes + kMargin) +
                " bytes: " + std::strerror(rc));
  pthread_join(thread, nullptr);
  if (call.error) std::rethrow_exception(call.error);
}

}  // namespace sqar
