// Small helpers shared by the sqar sub-commands: the error shape, option values and
// human-readable numbers (byte counts: common/parse_size.h).
#pragma once
#include <getopt.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sqar {
class ExcludeList;
}

namespace sqar::cli {

// Thrown for bad command lines; turned into exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs a command's body: UsageError prints "sqar CMD: message" and a pointer to --help and
// gives 2; any other exception prints "sqar CMD: message" and gives error_code.
// What the body printed is flushed after it: standard output full or closed is then an error
// naming its cause.
int run_guarded(const char* cmd, const std::function<int()>& body, int error_code = 1);
// fflush(stdout) before a message on standard error (to keep the two in order) that keeps the
// cause of a failure for run_guarded to report.
void flush_standard_output();

// The UsageError for what getopt_long returned instead of an option: ':' (an option without
// its value) or '?' (an unknown option); both name the argument as typed.
[[noreturn]] void throw_getopt_error(int c, char** argv, const option* longopts);

std::optional<int64_t> parse_int(const std::string& text);
// -j N: 1..1024 threads, or 0 for all cores (as xz -T0 and zstd -T0 take it).
unsigned parse_jobs_arg(const std::string& text);
unsigned default_jobs();  // all cores
// SOURCE_DATE_EPOCH from the environment: nullopt when unset or empty; a UsageError when it is
// not a time an image can hold (0 .. 2^32 - 1).
std::optional<int64_t> source_date_epoch();
// -b SIZE: a power of two from 4K to 1M ("128K", "1M", "65536").
uint32_t parse_block_size(const std::string& arg);
// --uid / --gid: a numeric id, or a user / group name of this machine.
uint32_t parse_user_id(const std::string& arg);
uint32_t parse_group_id(const std::string& arg);
// --mtime SECONDS: a time SquashFS can store (0..2^32-1).
uint32_t parse_mtime(const std::string& arg);
// --exclude-from FILE: its GLOBs added to `excludes`; a file that cannot be read is a UsageError.
void add_excludes_from(ExcludeList& excludes, const std::string& file);
std::string human_bytes(uint64_t bytes);  // "1.2 GiB"
// "1 file", "0 files", "2 files": a count with its noun in the right number.
std::string counted(uint64_t n, const char* singular, const char* plural);
std::string json_escape(const std::string& s);

// --tar ARCHIVE and --tar-memory SIZE, shared by create and append.
std::string parse_tar_archive(const std::string& arg);
uint64_t parse_tar_memory(const std::string& arg);
// With --tar the archive is the source: `operands` must be the IMAGE alone, standard input
// ("-") must not be a terminal, and no option for SOURCE directories may be set.
// mksquashfs and unsquashfs spell long options with one dash (-comp, -noappend, -d DIR);
// getopt reads those as clusters of short options ("-comp" is -c "omp": "unknown compressor
// 'omp'"). Before parsing, a command looks for those words among its options (values of its
// own options are skipped, as getopt would take them) and names sqar's spelling instead.
struct ForeignOption {
  const char* word;  // as typed, with its dash
  const char* hint;  // what to use in sqar
};
extern const std::vector<ForeignOption> kMksquashfsOptions;
extern const std::vector<ForeignOption> kUnsquashfsOptions;
void reject_foreign_options(int argc, char** argv, const char* optstring, const option* longopts,
                            const std::vector<ForeignOption>& foreign, const char* tool);

void check_tar_usage(const std::string& tar, int operands, const char* cmd, bool source_dir_options);
// --tar-memory without --tar, and standard input named twice (--tar - with --exclude-from -):
// usage errors rather than an option silently ignored or an archive read as patterns.
// `exclude_files` are the --exclude-from arguments, read only after these checks.
void check_tar_companions(const std::string& tar, bool tar_memory_given, const std::vector<std::string>& exclude_files);
// For the commands that write an image or an archive (create, append, merge, extract --tar):
// every signal whose default action ends the process removes a named temporary file first
// (only filesystems without O_TMPFILE need one), then ends it as the signal would. A signal the caller ignores stays
// ignored (nohup, `trap '' HUP`, a shell's background job and SIGINT), as tar leaves it.
// SIGXFSZ is ignored, so a file-size limit becomes a write error (EFBIG) that names the image
// and cleans up like any other.
void remove_temp_image_on_fatal_signals();
// Installs `handler` (with sigaction `flags`) for each of `signals` the caller does not ignore:
// one inherited ignored stays ignored (nohup, a shell's background job), as tar leaves it.
void handle_signals_not_ignored(std::initializer_list<int> signals, void (*handler)(int), int flags = 0);
// IMAGE (or OUT) '-': standard output must be neither a terminal nor wanted for --json.
void check_image_to_standard_output(const std::string& image, bool json);
// Whether one of `files` is "-", standard input.
bool names_standard_input(const std::vector<std::string>& files);

}  // namespace sqar::cli
