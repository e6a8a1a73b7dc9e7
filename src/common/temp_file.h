// Files that never get a name: the spool behind IMAGE '-' (an image read from standard input,
// or written to standard output). They are gone however the process ends (SIGKILL included).
#pragma once
#include <string>

namespace sqar {

// $TMPDIR, or /tmp when it is unset or empty.
std::string temp_dir();

// An unnamed read-write file in dir, or -1 with errno set. O_TMPFILE where the filesystem has
// it; elsewhere mkstemp and an unlink with every signal held off in between, so no name is
// left behind by a signal either.
int unnamed_temp_file(const std::string& dir);

}  // namespace sqar
