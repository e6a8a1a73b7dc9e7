// `sqar verify`: decompress and check everything in an image; name every bad file.
#include <getopt.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "ops/verifier.h"
#include "read_common.h"
#include "repeated_problems.h"
#include "status_line.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar verify [OPTIONS] IMAGE\n"
    "\n"
    "Check an image end to end: every metadata block (inodes, directories, ids, xattrs, export\n"
    "table), every data block and fragment a file uses is read and decompressed, and each\n"
    "file's size is checked. When the image carries sqar's manifest trailer, every file's\n"
    "XXH3-128 is compared with it, which also catches damage a codec cannot detect (files\n"
    "smaller than a block are checked together, per fragment block: a mismatch names every\n"
    "file of that block). Files are checked in parallel. Works on images made by any tool\n"
    "(without a manifest, only what the codecs and the format can detect is caught).\n"
    "What the Linux kernel refuses though unsquashfs reads it is reported too: an xz block\n"
    "that needs a larger dictionary than the image declares, an xz check other than CRC32,\n"
    "and a declared xz dictionary that is not 2^n or 3*2^n bytes.\n"
    "Each bad file is named; a cause shared by more than 10 entries is named for the first 10\n"
    "and one line counts the others (--json lists them all).\n"
    "\n"
    "Options:\n"
    "  -j, --threads N     worker threads (default, and 0: all cores)\n"
    "  -q, --quiet         print nothing when the image is good (and no progress bar)\n"
    "      --json          the result as one JSON object on standard output, with the keys\n"
    "                      image, ok, entries, files, bytes, manifest, problems and errors\n"
    "                      (a list of {path, message}); see sqar(1)\n"
    "      --progress      show the progress bar even when stderr is not a terminal\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar verify backup.sqfs && echo intact\n"
    "  sqar verify -j 1 image.sqfs\n"
    "\n" SQAR_STDIN_IMAGE_HELP
    "\n"
    "Exit status: 0 when everything is right; 1 when something is wrong (each bad file is named:\n"
    "\"sqar verify: IMAGE: PATH: cause\"); 2 on bad usage.\n";

std::string verify_status(const ops::VerifyProgress& p, double secs) {
  if (p.metadata) return "checking metadata: " + std::to_string(p.entries) + " entries";
  return progress_bar(p.bytes_done, p.bytes_total, secs);
}

int verify_main(int argc, char** argv) {
  return run_guarded("verify", [&] {
    enum { kOffset = 256, kProgress, kJson };
    static const option longopts[] = {{"threads", required_argument, nullptr, 'j'},
                                      {"quiet", no_argument, nullptr, 'q'},
                                      {"progress", no_argument, nullptr, kProgress},
                                      {"json", no_argument, nullptr, kJson},
                                      {"offset", required_argument, nullptr, kOffset},
                                      {"help", no_argument, nullptr, 'h'},
                                      {nullptr, 0, nullptr, 0}};
    unsigned jobs = default_jobs();
    bool quiet = false, force_progress = false, json = false;
    uint64_t offset = 0;
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":j:qh", longopts, nullptr)) != -1;) {
      switch (c) {
        case 'j': jobs = parse_jobs_arg(optarg); break;
        case 'q': quiet = true; break;
        case kProgress: force_progress = true; break;
        case kJson: json = true; break;
        case kOffset: offset = parse_offset_arg(optarg); break;
        case 'h': std::fputs(kHelp, stdout); return 0;
        default: throw_getopt_error(c, argv, longopts);
      }
    }
    if (argc - optind != 1) throw UsageError("need exactly one IMAGE");
    std::string image_path = argv[optind];
    auto image = open_image(image_path, offset, streaming_cache_bytes(jobs), /*kernel_limits=*/true);
    std::vector<std::pair<std::string, std::string>> errors;  // for --json: every one
    RepeatedProblems shown;
    ops::Verifier v(*image, jobs, [&](ops::Severity, const std::string& path, const std::string& message) {
      shown.report("verify", image_path, path, message);
      if (json) errors.emplace_back(path, message);
    });
    size_t problems;
    {
      std::unique_ptr<StatusLine> bar;
      if (want_progress(quiet, force_progress))
        bar = std::make_unique<StatusLine>([&v](double secs) { return verify_status(v.progress(), secs); });
      problems = v.run();
    }
    if (json) {
      std::string out = "{\"image\": \"" + json_escape(image_path) + "\", \"ok\": " + (problems ? "false" : "true") +
                        ", \"entries\": " + std::to_string(v.entries()) + ", \"files\": " + std::to_string(v.files()) +
                        ", \"bytes\": " + std::to_string(v.bytes()) +
                        ", \"manifest\": " + (v.had_manifest() ? "true" : "false") +
                        ", \"problems\": " + std::to_string(problems) + ", \"errors\": [";
      for (size_t i = 0; i < errors.size(); ++i)
        out += std::string(i ? ", " : "") + "{\"path\": \"" + json_escape(errors[i].first) + "\", \"message\": \"" +
               json_escape(errors[i].second) + "\"}";
      out += "]}\n";
      std::fputs(out.c_str(), stdout);
      return problems ? 1 : 0;
    }
    shown.summarize("verify", image_path, "--json names every entry");
    if (problems) {
      std::fprintf(stderr, "sqar verify: %s: FAILED: %zu problem%s found\n", image_path.c_str(), problems,
                   problems == 1 ? "" : "s");
      return 1;
    }
    if (!quiet)
      std::fprintf(stderr, "%s: OK: %s, %s, %s of content checked%s\n", image_path.c_str(),
                   counted(v.entries(), "entry", "entries").c_str(), counted(v.files(), "file", "files").c_str(),
                   human_bytes(v.bytes()).c_str(),
                   v.had_manifest() ? " against the manifest trailer (XXH3-128)" : " (no manifest trailer)");
    return 0;
  });
}

RegisterCommand reg("verify", "check every block, table and file hash of an image", &verify_main);

}  // namespace
}  // namespace sqar::cli
