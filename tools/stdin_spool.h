// IMAGE '-': an image read from standard input. SquashFS is read by seeking (the superblock
// points to tables at the end), so a pipe is first copied to an unlinked temporary file.
#pragma once

namespace sqar::cli {

// A file descriptor (the caller closes it) of a seekable file holding standard input: standard
// input itself when it is a file or block device, else an unlinked temporary file in $TMPDIR
// (default /tmp) that the copy fills. The file has no name from the start (O_TMPFILE, or
// mkstemp + unlink with signals held off), so it is gone however the process ends. Throws
// UsageError for a terminal, sqar::Error naming the directory when the copy fails (disk full).
int seekable_stdin();

}  // namespace sqar::cli
