// Keeps sqarfs's own machine code mapped in the daemon.
//
// `echo 3 > /proc/sys/vm/drop_caches` (the benchmarks do it after mounting; memory pressure
// does much the same) evicts every page of the executable that the daemon has not mapped
// yet: pages read ahead at start-up but never run. The first requests that need such code
// (readdirplus, the listing cursor) would then wait for the disk (docs/architecture.md,
// "Resident code"). Pages a process has mapped are never dropped.
#pragma once

namespace sqar::fuse {

// Maps every page of the executable's code segments into this process (MADV_POPULATE_READ;
// touching each page on kernels before 5.14). Costs the code's size in resident memory
// (2.3 MB) and, from a cold cache, one sequential read of it: run it off the mount's path.
void keep_code_resident();

}  // namespace sqar::fuse
