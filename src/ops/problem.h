// How the engines in src/ops hand problems to their front end: one call per problem, as it is
// found, so a long run names a bad entry at once and a front end decides how to print it.
#pragma once
#include <functional>
#include <string>

namespace sqar::ops {

enum class Severity { error, warning };

// path: the entry inside the image ("" when the problem is not about one entry); message:
// the cause, without the image path. Called from worker threads, never concurrently.
using ProblemSink = std::function<void(Severity, const std::string& path, const std::string& message)>;

}  // namespace sqar::ops
