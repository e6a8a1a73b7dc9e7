// `sqar extract`: unpack an image into a directory, in parallel and without ever writing
// outside it.
#include <getopt.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "interrupt.h"
#include "ops/extractor.h"
#include "ops/tar_compression.h"
#include "ops/tar_export.h"
#include "read_common.h"
#include "status_line.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar extract [OPTIONS] IMAGE [PATH|GLOB...]\n"
    "       sqar extract --tar FILE|- [OPTIONS] IMAGE [PATH|GLOB...]\n"
    "\n"
    "Unpack a SquashFS 4.0 image (made by sqar, mksquashfs or gensquashfs; any compressor) into\n"
    "a directory: content, mode, owner (when run as root), mtime, xattrs, hard links, symlinks,\n"
    "devices, fifos, sockets and sparse holes. Files are written in parallel.\n"
    "\n"
    "With PATHs or GLOBs only matching entries (and everything below a matching directory) are\n"
    "extracted, together with the directories that lead to them. Globs match whole paths inside\n"
    "the image ('*' does not cross '/'; a '**' component spans any number of directories, as in\n"
    "gitignore: 'etc/**/*.conf'); quote them so the shell leaves them alone. As with tar -x, a\n"
    "PATH or GLOB that matches nothing is named and the exit status is 1, while what the others\n"
    "match is extracted; when none matches, nothing is written.\n"
    "\n"
    "Options:\n"
    "  -C, --directory DIR   extract into DIR (created if missing; default: the current directory)\n"
    "  -j, --threads N       worker threads (default, and 0: all cores)\n"
    "      --exclude GLOB    leave out matching entries (and all below a matching directory),\n"
    "                        matched as 'sqar create --exclude' matches: '*.o' by name at any\n"
    "                        depth, 'var/cache' or '/var/cache' by path inside the image\n"
    "      --exclude-from FILE  read GLOBs from FILE, one a line ('-': standard input)\n"
    "      --strip-components N  leave out the first N directories of each path, as tar -x does\n"
    "                        ('proj-1.0/src/a.c' with 1: 'src/a.c'); entries N or fewer levels\n"
    "                        deep are not extracted, and PATHs and GLOBs match the paths in the\n"
    "                        image; two entries that would get one name: the first wins, the\n"
    "                        other is named and left out with all below it (--tar too)\n"
    "      --overwrite       replace existing files, symlinks and devices (existing directories\n"
    "                        are reused; without this option any existing non-directory is an error)\n"
    "      --skip-old-files  keep existing files, symlinks and devices as they are, as tar does:\n"
    "                        run again this way, an interrupted extraction finishes (directories,\n"
    "                        existing or not, still get the image's mode, owner and times, which\n"
    "                        tar leaves alone; hard links are made to a kept file of their type)\n"
    "      --no-same-owner   do not restore owners (the default unless running as root); a\n"
    "                        file keeps a set-uid (set-gid) bit only if it ends up owned by\n"
    "                        the image's user (group), as bsdtar and unsquashfs do\n"
    "      --no-xattrs       do not restore extended attributes (with --tar: do not archive them)\n"
    "      --no-verify       do not check file contents against the image's manifest trailer\n"
    "      --offset N        the image starts N bytes into IMAGE (e.g. inside a larger file)\n"
    "      --tar FILE        write a pax tar archive to FILE ('-': standard output) instead of\n"
    "                        a directory: numeric owners, hard links, devices, xattrs, holes as\n"
    "                        GNU sparse 1.0; the root directory itself and sockets are left out\n"
    "                        (a device or FIFO as FILE is written into, as tar does)\n"
    "      --compress NAME   compress the --tar archive: gzip, bzip2, xz, zstd, lz4, lzma,\n"
    "                        lzip, compress or none. Without it FILE's suffix decides, as\n"
    "                        with tar -a: .tar.gz/.tgz/.taz gzip, .tar.xz/.txz xz, .tar.zst/\n"
    "                        .tzst zstd, .tar.bz2/.tbz/.tbz2/.tz2/.tb2 bzip2, .tar.lz4 lz4,\n"
    "                        .lzma/.tlz lzma, .lz lzip, .Z/.taZ compress; any\n"
    "                        other name, and '-', a plain tar. Each at its tool's default\n"
    "                        level (xz 6, zstd 3, bzip2 9; gzip at libdeflate's 7, standing\n"
    "                        for gzip's 6); gzip, xz and zstd use -j's threads (gzip as\n"
    "                        4 MiB members), the archive the same for any -j\n"
    "  -z, --gzip, -J, --xz, --bzip2, --zstd, --lz4   the same as --compress gzip, xz, ...\n"
    "  -q, --quiet           no progress bar and no summary\n"
    "      --progress        show the progress bar (and summary) even when stderr is not a terminal\n"
    "  -h, --help            show this help\n"
    "\n"
    "Content check: when the image carries sqar's manifest trailer, every file it covers is\n"
    "checked against its XXH3-128 while it is written; a file that does not match is removed\n"
    "and named (\"content differs from the manifest\"), and the exit status is 1. Small files\n"
    "sharing a fragment block are checked together: a mismatch removes and names all of them.\n"
    "With --tar a mismatch is an error naming the file: no archive file is left (on standard\n"
    "output the archive ends there, incomplete); a damaged trailer stops it before anything is\n"
    "written (--no-verify writes the archive without the check).\n"
    "\n"
    "Safety: an entry name containing '/', an empty name, '.', '..' or a name listed twice (a\n"
    "symlink followed by an entry of the same name) is damage: the directory listing it is\n"
    "named and the rest of its listing left out (in the image's root directory the whole\n"
    "extraction fails before anything is written); directory loops make the whole extraction\n"
    "fail before anything is written. Symlinks are never followed while creating entries.\n"
    "\n"
    "Examples:\n"
    "  sqar extract backup.sqfs -C /srv/restore          everything into /srv/restore\n"
    "  sqar extract backup.sqfs -C out etc/passwd        one file (and its directories)\n"
    "  sqar extract backup.sqfs -C out 'var/log/*.log'   matching files\n"
    "  sqar extract -j 4 --overwrite image.sqfs -C out   refresh an earlier extraction\n"
    "  sqar extract --skip-old-files image.sqfs -C out  finish one that was interrupted\n"
    "  sqar extract --tar - image.sqfs | ssh host tar -xpf - -C /srv   stream it elsewhere\n"
    "  sqar extract --tar backup.tar.zst image.sqfs      a zstd tarball (by its suffix)\n"
    "  sqar extract --tar - --zstd image.sqfs | ssh host 'zstd -d | tar -xpf - -C /srv'\n"
    "  sqar extract --tar - image.sqfs | zstd -19 -T0 > image.tar.zst   another level\n"
    "\n" SQAR_STDIN_IMAGE_HELP
    "\n"
    "Interruption: the first SIGINT (Ctrl-C), SIGTERM or SIGHUP stops the extraction: no\n"
    "entry is begun after it, a file being written is removed, the directories made get their\n"
    "modes and times, one line says how many entries were not extracted, and sqar ends by the\n"
    "signal. Run again with --skip-old-files, it extracts what is missing. A second signal\n"
    "ends it at once, and may leave the file being written incomplete: --skip-old-files keeps\n"
    "it with a warning that names it (so does 'sqar diff IMAGE DIR'); extract it again with\n"
    "--overwrite. A signal the caller ignores (nohup) stays ignored.\n"
    "\n"
    "Exit status: 0 when everything was extracted, 1 when an entry or the image failed, 2 on\n"
    "bad usage. Errors read \"sqar extract: IMAGE: PATH: cause\".\n";

std::string extract_status(const ops::ExtractProgress& p, double secs) {
  switch (p.phase.load()) {
    case ops::ExtractPhase::reading_directories: return "reading the image's directories...";
    case ops::ExtractPhase::writing_entries:
      return progress_bar(p.bytes_done.load(), p.bytes_total.load(), secs) + "  " +
             std::to_string(p.entries_done.load()) + "/" + std::to_string(p.entries_total.load()) + " entries";
    case ops::ExtractPhase::links_and_directory_metadata: break;
  }
  return "hard links and directory metadata...";
}

// The archive is written as the image is walked, so there is no total to show a bar against.
std::string tar_status(const ops::TarExportProgress& p, double secs) {
  const uint64_t bytes = p.bytes_done.load();
  return counted(p.entries_done.load(), "entry", "entries") + ", " + human_bytes(bytes) + "  " +
         human_bytes(uint64_t(double(bytes) / std::max(secs, 0.001))) + "/s";
}

// The line shown after the progress bar, for a directory and for --tar alike.
void print_summary(const std::string& image, uint64_t entries, uint64_t bytes, const std::string& into,
                   std::chrono::steady_clock::time_point start) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "%s: %s, %s of file content into %s in %.2f s\n", image.c_str(),
               counted(entries, "entry", "entries").c_str(), human_bytes(bytes).c_str(), into.c_str(), secs);
}

// `given`: --compress or one of its short forms; otherwise the archive's name decides.
int extract_tar(reader::Image& image, const std::string& out, std::optional<ops::TarCompression> given,
                const ops::ExtractOptions& opt, bool show) {
  if (out.empty()) throw UsageError("empty --tar file");
  if (opt.dest != ".") throw UsageError("--tar writes an archive, not a directory: -C does not apply");
  // As tar does: an archive on a terminal is unreadable and almost always a mistake.
  if (out == "-" && isatty(STDOUT_FILENO)) throw UsageError("refusing to write an archive to a terminal");
  ops::TarExportOptions topt;
  topt.output = out;
  topt.compression = given ? *given : ops::tar_compression_for_name(out);
  topt.patterns = opt.patterns;
  topt.excludes = opt.excludes;
  topt.strip_components = opt.strip_components;
  topt.xattrs = opt.xattrs;
  topt.threads = opt.jobs;
  topt.verify = opt.verify;
  // An error leaves an entry out of an archive that is still written (exit status 1, as
  // extract into a directory); a warning only says what the archive holds differently.
  bool left_out = false;
  topt.problems = [&image, &left_out](ops::Severity severity, const std::string& path, const std::string& message) {
    const bool error = severity == ops::Severity::error;
    left_out |= error;
    print_message(std::string("sqar extract: ") + (error ? "" : "warning: ") + image.path() + ": " + path + ": " +
                  message);
  };
  // The archive is built unnamed and named when complete; where the filesystem lacks O_TMPFILE
  // it has a temporary name, which a signal must not leave behind.
  remove_temp_image_on_fatal_signals();
  ops::TarExportProgress progress;
  const auto start = std::chrono::steady_clock::now();
  ops::TarExportStats stats;
  {
    std::unique_ptr<StatusLine> bar;
    if (show) {
      topt.progress = &progress;
      bar = std::make_unique<StatusLine>([&progress](double secs) { return tar_status(progress, secs); });
    }
    stats = ops::export_tar(image, topt);
  }
  if (show) print_summary(image.path(), stats.entries, stats.bytes, out == "-" ? "standard output" : out, start);
  return left_out ? 1 : 0;
}

int extract_main(int argc, char** argv) {
  return run_guarded("extract", [&] {
    enum {
      kOverwrite = 256,
      kSkipOldFiles,
      kNoSameOwner,
      kNoXattrs,
      kOffset,
      kProgress,
      kNoVerify,
      kTar,
      kExclude,
      kExcludeFrom,
      kStripComponents,
      kCompress,
      kBzip2,
      kZstd,
      kLz4
    };
    static const option longopts[] = {{"directory", required_argument, nullptr, 'C'},
                                      {"threads", required_argument, nullptr, 'j'},
                                      {"overwrite", no_argument, nullptr, kOverwrite},
                                      {"skip-old-files", no_argument, nullptr, kSkipOldFiles},
                                      {"no-same-owner", no_argument, nullptr, kNoSameOwner},
                                      {"no-xattrs", no_argument, nullptr, kNoXattrs},
                                      {"offset", required_argument, nullptr, kOffset},
                                      {"quiet", no_argument, nullptr, 'q'},
                                      {"progress", no_argument, nullptr, kProgress},
                                      {"no-verify", no_argument, nullptr, kNoVerify},
                                      {"tar", required_argument, nullptr, kTar},
                                      {"exclude", required_argument, nullptr, kExclude},
                                      {"exclude-from", required_argument, nullptr, kExcludeFrom},
                                      {"strip-components", required_argument, nullptr, kStripComponents},
                                      {"compress", required_argument, nullptr, kCompress},
                                      {"gzip", no_argument, nullptr, 'z'},
                                      {"xz", no_argument, nullptr, 'J'},
                                      {"bzip2", no_argument, nullptr, kBzip2},
                                      {"zstd", no_argument, nullptr, kZstd},
                                      {"lz4", no_argument, nullptr, kLz4},
                                      {"help", no_argument, nullptr, 'h'},
                                      {nullptr, 0, nullptr, 0}};
    ops::ExtractOptions opt;
    opt.jobs = default_jobs();
    opt.same_owner = geteuid() == 0;
    bool no_same_owner_given = false;
    uint64_t offset = 0;
    bool quiet = false, force_progress = false;
    std::vector<std::string> exclude_files;
    std::optional<std::string> tar_out;
    std::optional<ops::TarCompression> compression;
    std::string compression_option;  // as typed, for the error without --tar
    const auto set_compression = [&](ops::TarCompression c, const char* as) {
      if (compression && *compression != c)
        throw UsageError(std::string(as) + " conflicts with " + compression_option + ": give one compression");
      compression = c;
      compression_option = as;
    };
    optind = 1;
    opterr = 0;
    reject_foreign_options(argc, argv, ":C:j:qhzJ", longopts, kUnsquashfsOptions, "unsquashfs");
    for (int c; (c = getopt_long(argc, argv, ":C:j:qhzJ", longopts, nullptr)) != -1;) {
      switch (c) {
        case 'C': opt.dest = optarg; break;
        case 'j': opt.jobs = parse_jobs_arg(optarg); break;
        case kOverwrite: opt.overwrite = true; break;
        case kSkipOldFiles: opt.skip_existing = true; break;
        case kNoSameOwner:
          opt.same_owner = false;
          no_same_owner_given = true;
          break;
        case kNoXattrs: opt.xattrs = false; break;
        case kNoVerify: opt.verify = false; break;
        case kOffset: offset = parse_offset_arg(optarg); break;
        case 'q': quiet = true; break;
        case kProgress: force_progress = true; break;
        case kTar: tar_out = optarg; break;
        case kCompress: {
          const auto c = ops::parse_tar_compression(optarg);
          if (!c)
            throw UsageError("--compress wants one of " + ops::tar_compression_names() + ", not '" +
                             std::string(optarg) + "'");
          set_compression(*c, "--compress");
          break;
        }
        case 'z': set_compression(ops::TarCompression::gzip, "--gzip"); break;
        case 'J': set_compression(ops::TarCompression::xz, "--xz"); break;
        case kBzip2: set_compression(ops::TarCompression::bzip2, "--bzip2"); break;
        case kZstd: set_compression(ops::TarCompression::zstd, "--zstd"); break;
        case kLz4: set_compression(ops::TarCompression::lz4, "--lz4"); break;
        case kExclude: opt.excludes.add(optarg); break;
        case kExcludeFrom:
          exclude_files.push_back(optarg);  // read once the command line is known to be good
          break;
        case kStripComponents: {
          const auto n = parse_int(optarg);
          if (!n || *n < 0 || *n > 4096)
            throw UsageError("--strip-components wants a number of path components (0-4096), not '" +
                             std::string(optarg) + "'");
          opt.strip_components = unsigned(*n);
          break;
        }
        case 'h': std::fputs(kHelp, stdout); return 0;
        default: throw_getopt_error(c, argv, longopts);
      }
    }
    if (opt.overwrite && opt.skip_existing)
      throw UsageError("--overwrite replaces existing files and --skip-old-files keeps them: give one");
    if (tar_out && opt.skip_existing)
      throw UsageError("--skip-old-files is for files in a directory; --tar writes an archive");
    if (tar_out && opt.overwrite)
      throw UsageError("--overwrite is for files in a directory; --tar replaces FILE as tar -cf does");
    if (tar_out && no_same_owner_given)
      throw UsageError("--no-same-owner is for files in a directory; --tar stores the image's owners, as numbers");
    if (compression && !tar_out)
      throw UsageError(compression_option + " compresses a --tar archive; a directory is written as files");
    if (optind >= argc) throw UsageError("missing IMAGE");
    std::string image_path = argv[optind++];
    if (image_path == "-" && names_standard_input(exclude_files))
      throw UsageError("IMAGE - and --exclude-from - would both read standard input; put the patterns in a file");
    opt.patterns = image_pattern_args(argc, argv, optind);
    if (opt.dest.empty()) throw UsageError("empty -C directory");
    for (const std::string& f : exclude_files) add_excludes_from(opt.excludes, f);
    auto image = open_image(image_path, offset, streaming_cache_bytes(opt.jobs));
    const bool show = want_progress(quiet, force_progress);
    if (tar_out) return extract_tar(*image, *tar_out, compression, opt, show);
    ops::ExtractProgress progress;
    size_t failed;
    // Errors that are not entries failing (a damaged manifest trailer, a PATTERN that matched
    // nothing), already named.
    bool other_error = false;
    const auto start = std::chrono::steady_clock::now();
    {
      std::unique_ptr<StatusLine> bar;
      if (show) {
        opt.progress = &progress;
        bar = std::make_unique<StatusLine>([&progress](double secs) { return extract_status(progress, secs); });
      }
      opt.problems = [&](ops::Severity severity, const std::string& path, const std::string& message) {
        if (severity == ops::Severity::error) other_error = true;
        if (severity == ops::Severity::error)
          report("extract", image_path, path.empty() ? message : path + ": " + message);
        else  // named as errors are: the image, then the entry
          print_message("sqar extract: warning: " + image_path + ": " + path + ": " + message);
      };
      opt.stop = &stop_on_interrupt_signals();
      failed = ops::Extractor(*image, opt).run();
    }
    if (show) {
      print_summary(image_path, progress.entries_done, progress.bytes_done, opt.dest, start);
      if (const uint64_t kept = progress.entries_kept.load())
        std::fprintf(stderr, "%s: %s kept as %s (--skip-old-files)\n", image_path.c_str(),
                     counted(kept, "existing entry", "existing entries").c_str(), kept == 1 ? "it was" : "they were");
    }
    // The extractor named what the interruption left out; the caller learns of it as of any
    // interrupted command.
    if (interrupt_signal()) {
      std::fflush(stderr);
      end_by_interrupt_signal();
    }
    if (failed) {
      std::fprintf(stderr, "sqar extract: %s: %zu entr%s could not be extracted\n", image_path.c_str(), failed,
                   failed == 1 ? "y" : "ies");
      return 1;
    }
    return other_error ? 1 : 0;
  });
}

RegisterCommand reg("extract", "unpack an image into a directory", &extract_main);

}  // namespace
}  // namespace sqar::cli
