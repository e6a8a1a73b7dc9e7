// The soft limit on open descriptors, raised to the hard limit at start.
#pragma once

namespace sqar {

// Raises the soft RLIMIT_NOFILE to the hard limit. The default soft limit (1024 on most
// systems) exists for programs that still use select(); sqar and sqarfs never do, and a deep
// tree or many parallel readers need more. Failure is ignored: the old limit stays.
void raise_open_file_limit();

}  // namespace sqar
