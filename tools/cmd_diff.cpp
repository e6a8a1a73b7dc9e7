// `sqar diff`: differences in content and metadata between an image and a directory tree.
#include <getopt.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "common/display_name.h"
#include "common/error.h"
#include "ops/tree_compare.h"
#include "read_common.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar diff [OPTIONS] IMAGE DIR\n"
    "\n"
    "Compare IMAGE with the tree at DIR (DIR may be a symlink to it; no symlink below DIR is\n"
    "followed) and print one line per difference, sorted by path:\n"
    "  - PATH                  only in the image\n"
    "  + PATH                  only in the directory\n"
    "  M PATH: WHAT A != B     in both but different; A is the image's value, B the directory's\n"
    "WHAT is one of type, mode, uid, gid, mtime, size, content, target (symlinks), rdev\n"
    "(devices) and xattrs. Hard links (of anything but symlinks) are compared as groups: a\n"
    "name linked to an earlier name P on one side only shows as 'M PATH: hard link to P in the\n"
    "image, not on disk' (or 'on disk, not in the image'); links to files outside DIR do not\n"
    "count. The root is shown as '.'. DIR is listed and content is compared byte by byte (only\n"
    "when the sizes match) in parallel. Times are compared as SquashFS stores them (seconds,\n"
    "1970..2106); xattrs it cannot store (system.*) are not compared.\n"
    "\n"
    "Options:\n"
    "      --no-times      ignore mtimes\n"
    "      --no-owners     ignore uid and gid\n"
    "      --no-xattrs     ignore extended attributes\n"
    "  -q, --quiet         print nothing: the exit status alone says whether they differ, and\n"
    "                      the comparison stops at the first difference (as git diff --quiet)\n"
    "  -j, --threads N     threads comparing content (default, and 0: all cores)\n"
    "      --json          a JSON array on standard output instead, one object per line above\n"
    "                      with the keys change (only_in_image, only_in_dir, modified), path\n"
    "                      and, for modified, detail (\"mode 0644 != 0600\"); see sqar(1)\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar diff backup.sqfs /srv/data              what changed since the backup\n"
    "  sqar diff --no-owners image.sqfs ./unpacked  ignore ownership (unpacked as a user)\n"
    "  sqar diff -q backup.sqfs /srv/data || sqar create -f /srv/data backup.sqfs\n"
    "\n" SQAR_STDIN_IMAGE_HELP
    "\n"
    "Exit status: 0 when they are equal, 1 when they differ, 2 on errors or bad usage. A file\n"
    "that cannot be read is named on standard error where the walk meets it; the comparison\n"
    "goes on, and the status is 2.\n";

// One JSON object per difference, printed as it comes. The lines are "- PATH", "+ PATH" and
// "M PATH: DETAIL" (tree_compare.h); PATH is known, so DETAIL is what follows it even when a
// name contains ": ".
class JsonArrayPrinter {
 public:
  void print(const ops::Difference& d) {
    const char kind = d.line.empty() ? '?' : d.line[0];
    const char* change = kind == '-' ? "only_in_image" : kind == '+' ? "only_in_dir" : "modified";
    std::string out = std::string(printed_ ? ",\n" : "[\n") + "{\"change\": \"" + change + "\", \"path\": \"" +
                      json_escape(d.path) + "\"";
    const size_t detail = 2 + d.path.size() + 2;
    if (kind == 'M' && d.line.size() >= detail) out += ", \"detail\": \"" + json_escape(d.line.substr(detail)) + "\"";
    out += "}";
    std::fputs(out.c_str(), stdout);
    printed_ = true;
  }
  void finish() { std::fputs(printed_ ? "\n]\n" : "[]\n", stdout); }

 private:
  bool printed_ = false;
};

int diff_main(int argc, char** argv) {
  return run_guarded(
      "diff",
      [&] {
        enum { kOffset = 256, kNoTimes, kNoOwners, kNoXattrs, kJson };
        static const option longopts[] = {{"no-times", no_argument, nullptr, kNoTimes},
                                          {"no-owners", no_argument, nullptr, kNoOwners},
                                          {"no-xattrs", no_argument, nullptr, kNoXattrs},
                                          {"threads", required_argument, nullptr, 'j'},
                                          {"offset", required_argument, nullptr, kOffset},
                                          {"help", no_argument, nullptr, 'h'},
                                          {"json", no_argument, nullptr, kJson},
                                          {"quiet", no_argument, nullptr, 'q'},
                                          {nullptr, 0, nullptr, 0}};
        ops::CompareOptions opt;
        opt.jobs = default_jobs();
        uint64_t offset = 0;
        bool json = false, quiet = false;
        optind = 1;
        opterr = 0;
        for (int c; (c = getopt_long(argc, argv, ":j:qh", longopts, nullptr)) != -1;) {
          switch (c) {
            case kNoTimes: opt.times = false; break;
            case kNoOwners: opt.owners = false; break;
            case kNoXattrs: opt.xattrs = false; break;
            case kJson: json = true; break;
            case 'q': quiet = opt.stop_at_first_difference = true; break;
            case 'j': opt.jobs = parse_jobs_arg(optarg); break;
            case kOffset: offset = parse_offset_arg(optarg); break;
            case 'h': std::fputs(kHelp, stdout); return 0;
            default: throw_getopt_error(c, argv, longopts);
          }
        }
        if (argc - optind != 2) throw UsageError("need IMAGE and DIR");
        if (quiet && json) throw UsageError("--quiet prints nothing, so --json does not apply");
        std::string image_path = argv[optind], root = argv[optind + 1];
        auto image = open_image(image_path, offset, streaming_cache_bytes(opt.jobs));
        // Differences go to standard output and files that could not be compared to standard
        // error as the walk finds them, in path order; the comparison goes on past the
        // latter (as diff -r does), which make the status 2.
        JsonArrayPrinter json_printer;
        ops::CompareReport report_to;
        if (json)
          report_to.difference = [&](const ops::Difference& d) { json_printer.print(d); };
        else if (!quiet)
          report_to.difference = [](const ops::Difference& d) { std::printf("%s\n", escape_name(d.line).c_str()); };
        report_to.error = [&](const std::string& message) {
          flush_standard_output();
          report("diff", image_path, message);
        };
        ops::CompareCounts counts;
        try {
          counts = ops::compare_image_with_tree(*image, root, opt, report_to);
        } catch (const Error&) {
          // What was printed before the damage stays one valid array; the error follows.
          if (json) json_printer.finish();
          throw;
        }
        if (json) json_printer.finish();
        if (quiet && counts.differences > 0) return 1;  // answered, whatever else failed
        if (counts.errors > 0) return 2;
        return counts.differences > 0 ? 1 : 0;
      },
      2);
}

RegisterCommand reg("diff", "compare an image with a directory tree", &diff_main);

}  // namespace
}  // namespace sqar::cli
