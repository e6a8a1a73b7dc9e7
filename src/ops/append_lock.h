// append replaces IMAGE with a new file holding IMAGE's data and the new entries. Two appends
// of one IMAGE at once would each rename its result over the name, and the first one's
// additions would be lost with both reporting success. An AppendLock serialises them: it holds
// an exclusive flock on the file at IMAGE for the whole run (a second append waits, saying so),
// and before the commit checks that IMAGE is still that file, for programs that do not take
// the lock (mksquashfs, cp, another create --force).
#pragma once
#include <sys/types.h>

#include <functional>
#include <string>

#include "common/unique_fd.h"

namespace sqar::ops {

class AppendLock {
 public:
  AppendLock(const std::string& image, const std::function<void(const std::string&)>& warn);
  AppendLock(const AppendLock&) = delete;
  AppendLock& operator=(const AppendLock&) = delete;

  // Throws when IMAGE is no longer the file that was locked (and loaded).
  void check_still_in_place() const;

 private:
  std::string path_;
  UniqueFd fd_;  // holds the flock
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace sqar::ops
