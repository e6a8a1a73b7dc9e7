#include "cli_util.h"

#include <getopt.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>
#include <thread>

#include "common/display_name.h"
#include "common/error.h"
#include "common/owner_id.h"
#include "common/parse_size.h"
#include "scan/exclude.h"
#include "writer/image_file.h"

namespace sqar::cli {
namespace {
int g_stdout_error = 0;  // the cause of the first failed flush of standard output
}  // namespace

void flush_standard_output() {
  if (std::fflush(stdout) != 0 && g_stdout_error == 0) g_stdout_error = errno;
}

int run_guarded(const char* cmd, const std::function<int()>& body, int error_code) {
  try {
    const int status = body();
    // What the command printed (a listing, a report, --json) is lost if standard output is
    // full or closed: that is a failure, as it is for coreutils and tar.
    flush_standard_output();
    if (std::ferror(stdout)) throw_errno("standard output", g_stdout_error ? g_stdout_error : EIO);
    return status;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "sqar %s: %s\nTry 'sqar %s --help' for examples.\n", cmd, printable(e.what()).c_str(), cmd);
    return 2;
  } catch (const OptionError& e) {
    std::fprintf(stderr, "sqar %s: %s\nTry 'sqar %s --help' for examples.\n", cmd, printable(e.what()).c_str(), cmd);
    return 2;
  } catch (const std::bad_alloc&) {
    // "std::bad_alloc" says nothing to a user; the inputs' claims are bounded, so this is a
    // limit (ulimit -v, a cgroup) smaller than what the work needs.
    std::fprintf(stderr, "sqar %s: out of memory (is a ulimit or cgroup limit lower than the job needs?)\n", cmd);
    return error_code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sqar %s: %s\n", cmd, printable(e.what()).c_str());
    return error_code;
  }
}

std::optional<int64_t> source_date_epoch() {
  const char* sde = std::getenv("SOURCE_DATE_EPOCH");
  if (!sde || !*sde) return std::nullopt;
  auto v = parse_int(sde);
  if (!v || *v < 0 || *v > UINT32_MAX) throw UsageError(std::string("invalid SOURCE_DATE_EPOCH '") + sde + "'");
  return v;
}

void throw_getopt_error(int c, char** argv, const option* longopts) {
  // Inside a cluster such as -xy, optind still points at the cluster or already past it, so
  // argv[optind - 1] may be another argument: a short option is named by its letter (optopt).
  // A missing value only happens at the last argument, which names a long option itself; an
  // unknown long option leaves optopt 0.
  const std::string last = argv[optind - 1];
  if (last.rfind("--", 0) == 0 && c != ':') {
    // getopt_long reports "--force=yes" by the option's short letter (optopt), and an ambiguous
    // prefix as unknown: name the option as typed, and the cause.
    const std::string typed = last.substr(0, last.find('='));
    if (optopt != 0 && typed.size() < last.size()) throw UsageError("option '" + typed + "' takes no value");
    std::vector<std::string> matches;
    for (const option* o = longopts; o && o->name && typed.size() > 2; ++o)
      if (std::string_view(o->name).substr(0, typed.size() - 2) == std::string_view(typed).substr(2))
        matches.push_back(std::string("--") + o->name);
    if (matches.size() > 1) {
      std::string list;
      for (const std::string& m : matches) list += (list.empty() ? "" : ", ") + m;
      throw UsageError("option '" + typed + "' is ambiguous: it could be " + list);
    }
  }
  const bool long_option = last.rfind("--", 0) == 0 && (c == ':' || optopt == 0);
  const std::string arg = long_option || optopt <= 0 || optopt >= 128 ? last : std::string("-") + char(optopt);
  if (c == ':') throw UsageError("option '" + arg + "' needs a value");
  throw UsageError("unknown option '" + arg + "'");
}

const std::vector<ForeignOption> kMksquashfsOptions = {
    {"-comp", "-c/--compressor NAME"},
    {"-Xcompression-level", "-l/--level N"},
    {"-noappend", "not needed, sqar create always writes a new image (-f/--force replaces one)"},
    {"-no-xattrs", "--no-xattrs"},
    {"-xattrs", "not needed, xattrs are stored by default"},
    {"-all-root", "--all-root"},
    {"-root-owned", "--all-root"},
    {"-force-uid", "--uid N"},
    {"-force-gid", "--gid N"},
    {"-all-time", "--mtime T"},
    {"-mkfs-time", "SOURCE_DATE_EPOCH=T in the environment"},
    {"-fstime", "SOURCE_DATE_EPOCH=T in the environment"},
    {"-quiet", "-q/--quiet"},
    {"-no-progress", "-q/--quiet"},
    {"-progress", "--progress"},
    {"-processors", "-j/--threads N"},
    {"-e", "--exclude GLOB (one pattern each)"},
    {"-ef", "--exclude-from FILE"},
    {"-wildcards", "not needed, --exclude takes globs"},
    {"-keep-as-directory", "--keep-as-directory"},
    {"-one-file-system", "--one-file-system"},
    {"-no-exports", "--no-export"},
    {"-info", "--progress (sqar names each file only in errors and warnings)"},
};

const std::vector<ForeignOption> kUnsquashfsOptions = {
    {"-d", "-C/--directory DIR"},
    {"-dest", "-C/--directory DIR"},
    {"-f", "--overwrite"},
    {"-force", "--overwrite"},
    {"-n", "-q/--quiet"},
    {"-no-progress", "-q/--quiet"},
    {"-p", "-j/--threads N"},
    {"-processors", "-j/--threads N"},
    {"-no-xattrs", "--no-xattrs"},
    {"-o", "--offset N"},
    {"-offset", "--offset N"},
    {"-l", "sqar list IMAGE"},
    {"-ll", "sqar list -l IMAGE"},
    {"-lls", "sqar list -l IMAGE"},
    {"-s", "sqar info IMAGE"},
    {"-stat", "sqar info IMAGE"},
    {"-cat", "sqar cat IMAGE PATH"},
};

void reject_foreign_options(int argc, char** argv, const char* optstring, const option* longopts,
                            const std::vector<ForeignOption>& foreign, const char* tool) {
  auto takes_value = [&](char c) {
    const char* p = std::strchr(optstring, c);
    return c != ':' && p && p[1] == ':';
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return;
    if (arg.size() < 2 || arg[0] != '-') continue;
    if (arg[1] == '-') {  // a long option of ours: its value may be the next argument
      const std::string name = arg.substr(2, arg.find('=') - 2);
      for (const option* o = longopts; o->name; ++o)
        if (name == o->name && o->has_arg == required_argument && arg.find('=') == std::string::npos) ++i;
      continue;
    }
    for (const ForeignOption& f : foreign)
      if (arg == f.word) throw UsageError("'" + arg + "' is " + std::string(tool) + "'s option; sqar's: " + f.hint);
    // A cluster of our short options: the first that takes a value takes the rest, or the
    // next argument.
    for (size_t k = 1; k < arg.size(); ++k) {
      if (!takes_value(arg[k])) continue;
      if (k + 1 == arg.size()) ++i;
      break;
    }
  }
}

std::optional<int64_t> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end) return std::nullopt;
  return int64_t(v);
}

uint32_t parse_block_size(const std::string& arg) {
  auto v = parse_size(arg);
  if (!v || *v < 4096 || *v > (1u << 20) || (*v & (*v - 1)))
    throw UsageError("invalid block size '" + arg + "' (a power of two from 4K to 1M)");
  return uint32_t(*v);
}

namespace {
// A number is the id itself; a name is looked up in this machine's user or group database, as
// mksquashfs -force-uid and tar --owner take either. 4294967295 is (uid_t)-1, "no change" to
// chown, which no file can be given.
uint32_t parse_owner(const std::string& arg, bool group) {
  if (auto v = parse_int(arg)) {
    if (*v < 0 || *v >= UINT32_MAX) throw UsageError("invalid id '" + arg + "' (0 to 4294967294)");
    return uint32_t(*v);
  }
  if (auto id = owner_id_by_name(arg, group)) return *id;
  throw UsageError(std::string("'") + arg + "' is no " + (group ? "group" : "user") + " name or id here");
}
}  // namespace

uint32_t parse_user_id(const std::string& arg) { return parse_owner(arg, false); }
uint32_t parse_group_id(const std::string& arg) { return parse_owner(arg, true); }

unsigned default_jobs() {
  const unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

unsigned parse_jobs_arg(const std::string& text) {
  auto v = parse_int(text);
  if (!v || *v < 0 || *v > 1024) throw UsageError("invalid thread count '" + text + "' (1-1024, or 0 for all cores)");
  return *v == 0 ? default_jobs() : unsigned(*v);
}

uint32_t parse_mtime(const std::string& arg) {
  auto v = parse_int(arg);
  if (!v || *v < 0 || *v > UINT32_MAX) throw UsageError("invalid --mtime '" + arg + "' (seconds since 1970)");
  return uint32_t(*v);
}

void add_excludes_from(ExcludeList& excludes, const std::string& file) {
  try {
    excludes.add_from_file(file);
  } catch (const Error& e) {
    throw UsageError(std::string("--exclude-from: ") + e.what());
  }
}

std::string counted(uint64_t n, const char* singular, const char* plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

namespace {
// Length of the well-formed UTF-8 sequence at p (at most n bytes), or 0 if there is none:
// overlong forms, surrogates and code points above U+10FFFF are not well-formed.
size_t utf8_sequence_length(const unsigned char* p, size_t n) {
  auto cont = [&](size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) { return i < n && p[i] >= lo && p[i] <= hi; };
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}
}  // namespace

std::string json_escape(const std::string& s) {
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = p[i];
    const size_t len = utf8_sequence_length(p + i, s.size() - i);
    char buf[8];
    if (len == 0) {
      // Not UTF-8 (file names are bytes): the byte as a lone surrogate U+DC80-U+DCFF, the
      // convention of Python's surrogateescape, so os.fsencode(json.loads(...)) gives the
      // name back and the output stays valid JSON.
      std::snprintf(buf, sizeof buf, "\\u%04x", 0xDC00u + c);
      out += buf;
      ++i;
      continue;
    }
    if (len > 1) {
      out.append(s, i, len);
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
    i += len;
  }
  return out;
}

std::string parse_tar_archive(const std::string& arg) {
  if (arg.empty()) throw UsageError("--tar needs an ARCHIVE ('-': standard input)");
  return arg;
}

uint64_t parse_tar_memory(const std::string& arg) {
  auto v = parse_size(arg);
  if (!v) throw UsageError("invalid --tar-memory '" + arg + "'");
  return *v;
}

void check_tar_usage(const std::string& tar, int operands, const char* cmd, bool source_dir_options) {
  if (operands != 1) throw UsageError("with --tar, give only the IMAGE (the archive is the source)");
  if (tar == "-" && isatty(STDIN_FILENO))
    throw UsageError(
        std::string("--tar -: standard input is a terminal, not an archive (pipe one in: tar -cf - DIR | sqar ") + cmd +
        " --tar - IMAGE)");
  if (source_dir_options)
    throw UsageError(
        "--one-file-system, --keep-as-directory, --skip-unreadable and --strict are for SOURCE "
        "directories, not --tar");
}

namespace {
void remove_temp_image_and_end(int sig) {
  remove_pending_temp_file_from_signal_handler();
  signal(sig, SIG_DFL);
  raise(sig);
}
}  // namespace

void handle_signals_not_ignored(std::initializer_list<int> signals, void (*handler)(int), int flags) {
  for (int sig : signals) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

void remove_temp_image_on_fatal_signals() {
  handle_signals_not_ignored(
      {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU},
      remove_temp_image_and_end);
  signal(SIGXFSZ, SIG_IGN);
}

void check_image_to_standard_output(const std::string& image, bool json) {
  if (image != "-") return;
  if (isatty(STDOUT_FILENO))
    throw UsageError(
        "'-' writes the image to standard output, which is a terminal: redirect it (> image.sqfs) or pipe it");
  if (json) throw UsageError("--json prints to standard output, which '-' gives to the image");
}

bool names_standard_input(const std::vector<std::string>& files) {
  return std::find(files.begin(), files.end(), "-") != files.end();
}

void check_tar_companions(const std::string& tar, bool tar_memory_given,
                          const std::vector<std::string>& exclude_files) {
  if (tar.empty() && tar_memory_given) throw UsageError("--tar-memory applies only with --tar");
  if (tar == "-" && names_standard_input(exclude_files))
    throw UsageError("--tar - and --exclude-from - would both read standard input; put the patterns in a file");
}

}  // namespace sqar::cli
