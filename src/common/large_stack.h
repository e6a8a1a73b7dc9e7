// Running a call on a stack large enough for what it puts there.
#pragma once
#include <cstddef>
#include <functional>

namespace sqar {

// Runs fn on a thread of its own whose stack holds at least `bytes` (plus a margin), and waits
// for it; an exception fn throws is rethrown here. For library calls that put an array sized
// by their input on the stack: libsquashfs writes a file inode's block list through one (4
// bytes a block), which overflowed an 8 MiB stack at 2^21 blocks (a 9 GiB sparse file at
// -b 4K, or any file of 256 GiB at 128 KiB blocks).
void run_with_stack(size_t bytes, const std::function<void()>& fn);

}  // namespace sqar
