#include "repeated_problems.h"

#include "read_common.h"

namespace sqar::cli {

void RepeatedProblems::report(const char* cmd, const std::string& image, const std::string& path,
                              const std::string& cause) {
  {
    std::lock_guard lock(mu_);
    size_t& n = seen_[cause];
    if (n++ == 0) order_.push_back(cause);
    if (n > kShownPerCause) return;
  }
  cli::report(cmd, image, path.empty() ? cause : path + ": " + cause);
}

void RepeatedProblems::summarize(const char* cmd, const std::string& image, const std::string& hint) {
  std::lock_guard lock(mu_);
  for (const std::string& cause : order_) {
    const size_t n = seen_[cause];
    if (n <= kShownPerCause) continue;
    const size_t more = n - kShownPerCause;
    cli::report(cmd, image,
                std::to_string(more) + (more == 1 ? " more entry: " : " more entries: ") + cause + " (" + hint + ")");
  }
}

}  // namespace sqar::cli
