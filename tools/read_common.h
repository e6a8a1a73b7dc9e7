// Shared plumbing of the read commands (extract, list, cat, info, verify, diff): option
// values, opening an image, and the error shape every command reports.
//
// Errors follow one rule: usage problems print "sqar CMD: message" plus a hint and exit 2;
// everything else prints "sqar CMD: IMAGE: cause" and exits 1 (diff: 2, since 1 means
// "differs"). The reader's own errors already start with the image path.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.h"
#include "reader/image.h"

namespace sqar::cli {

// One paragraph of every read command's --help (open_image implements it).
#define SQAR_STDIN_IMAGE_HELP                                                                    \
  "IMAGE '-' reads the image from standard input ('cat image.sqfs | sqar list -'). A SquashFS\n" \
  "image is read by seeking, so a pipe is first copied to an unlinked temporary file in\n"       \
  "$TMPDIR (default /tmp): it needs as much free space there as the image, and it is gone\n"     \
  "when sqar ends, however it ends.\n"

// Prints "sqar CMD: IMAGE: message" (the image prefix is skipped when message already has it).
void report(const char* cmd, const std::string& image, const std::string& message);

// Parsers for option values; throw UsageError naming the option.
uint64_t parse_offset_arg(const std::string& text);

// IMAGE '-' is standard input (stdin_spool.h); a named pipe is refused with that hint.
// cache_bytes: the data cache (decompressed blocks and fragments); 0 keeps the reader's default.
// kernel_limits: ImageOptions::kernel_limits (verify).
std::unique_ptr<reader::Image> open_image(const std::string& path, uint64_t offset, size_t cache_bytes = 0,
                                          bool kernel_limits = false);

// Data cache for commands that read files once, in image order, with full blocks decoded
// outside the cache (extract, verify, diff): it only holds the fragment blocks the threads
// are working in, 4 MiB each (32 blocks of 128 KiB, 4 of 1 MiB), 8-64 MiB in all. The reader's
// 64 MiB default kept every fragment of a 25 MB ports image.
size_t streaming_cache_bytes(unsigned jobs);

// Path given by a user for an entry inside an image: "./a//b/" -> "a/b"; "/" or "." -> "".
std::string normalize_image_path(const std::string& path);

// argv[first..argc) as PATTERNs for a PathSelection, normalized; empty when one names the root
// (the root selects everything).
std::vector<std::string> image_pattern_args(int argc, char** argv, int first);

}  // namespace sqar::cli
