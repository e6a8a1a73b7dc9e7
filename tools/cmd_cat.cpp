// `sqar cat`: the content of files inside an image, to standard output.
#include <getopt.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "command.h"
#include "common/error.h"
#include "common/path_pattern.h"
#include "ops/file_printer.h"
#include "ops/path_table.h"
#include "read_common.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar cat [OPTIONS] IMAGE PATTERN...\n"
    "\n"
    "Write the content of the files each PATTERN names inside IMAGE to standard output, in the\n"
    "order given. A PATTERN without wildcards is one path; symlinks inside the image are\n"
    "followed in every component (absolute targets are taken relative to the image root;\n"
    "'..' stops at it). A PATTERN with them selects entries as extract does (*, ? and [...]\n"
    "within one path component, a '**' component across any number, a matching directory brings\n"
    "what lies below it) and its regular files are written in image order; symlinks and other\n"
    "entries it selects are skipped.\n"
    "When the image carries sqar's manifest trailer, what was printed is checked against the\n"
    "file's XXH3-128; a mismatch names the file (\"content differs from the manifest\") and\n"
    "makes the exit status 1, after the content was written.\n"
    "\n"
    "Options:\n"
    "  -j, --threads N     threads decoding blocks ahead of the output (default, and 0: all cores)\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "      --no-verify     do not check contents against the manifest trailer\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar cat image.sqfs etc/hostname\n"
    "  sqar cat image.sqfs logs/a.log logs/b.log | grep ERROR\n"
    "  sqar cat image.sqfs big.iso > big.iso\n"
    "  sqar cat image.sqfs 'etc/**/*.conf'   every .conf file below etc, one after the other\n"
    "\n" SQAR_STDIN_IMAGE_HELP
    "\n"
    "Exit status: 0 when every PATTERN was printed, 1 when one is missing, is not a regular file,\n"
    "matches no regular file or is damaged (the others are still printed), 2 on bad usage.\n";

int cat_main(int argc, char** argv) {
  return run_guarded("cat", [&] {
    enum { kOffset = 256, kNoVerify };
    static const option longopts[] = {{"threads", required_argument, nullptr, 'j'},
                                      {"no-verify", no_argument, nullptr, kNoVerify},
                                      {"offset", required_argument, nullptr, kOffset},
                                      {"help", no_argument, nullptr, 'h'},
                                      {nullptr, 0, nullptr, 0}};
    uint64_t offset = 0;
    unsigned jobs = default_jobs();
    bool verify = true;
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":j:h", longopts, nullptr)) != -1;) {
      switch (c) {
        case 'j': jobs = parse_jobs_arg(optarg); break;
        case kOffset: offset = parse_offset_arg(optarg); break;
        case kNoVerify: verify = false; break;
        case 'h': std::fputs(kHelp, stdout); return 0;
        default: throw_getopt_error(c, argv, longopts);
      }
    }
    if (argc - optind < 2) throw UsageError("need IMAGE and at least one PATTERN");
    std::string image_path = argv[optind++];
    // An empty argument is almost always an unset shell variable; it names no file.
    for (int i = optind; i < argc; ++i)
      if (argv[i][0] == '\0') throw UsageError("empty PATTERN");
    // Blocks are decoded outside the cache (each is read once), so it only serves fragment
    // blocks shared by several PATHs.
    auto image = open_image(image_path, offset, 8u << 20);
    ops::FilePrinter printer(*image, STDOUT_FILENO, "standard output", jobs, verify);
    int status = 0;
    // A file that cannot be printed is reported and the next one printed; a failed write to
    // standard output (ops::OutputError) ends the command.
    auto print_or_report = [&](auto&& print) {
      try {
        print();
      } catch (const ops::OutputError&) {
        throw;
      } catch (const Error& e) {
        report("cat", image_path, e.what());
        status = 1;
      }
    };
    for (; optind < argc; ++optind) {
      const char* arg = argv[optind];
      print_or_report([&] {
        const std::string pattern = normalize_image_path(arg);
        if (!has_wildcard(pattern)) {
          printer.print(ops::resolve_regular_file(*image, pattern), arg);
          return;
        }
        // Collected first: the content is read outside the walk, not from inside its callback.
        // Only references are kept, and the walk reads no block lists: each file's list is
        // read when it is printed, so memory stays bounded however many names share a file
        // claiming millions of blocks.
        // Paths are kept as links to their directory (ops/path_table.h): whole, those of a deep
        // tree grow with its depth squared.
        std::vector<std::pair<ops::PathTable::Id, reader::InodeRef>> files;
        ops::PathTable paths;
        PathSelection selection({pattern});
        reader::WalkOptions walk_options;
        walk_options.with_blocks = false;
        image->walk(
            [&](const std::string& path, const reader::Inode& ino) {
              if (ino.is_dir()) paths.add(path, /*is_dir=*/true);
              if (selection.select(path) && ino.is_regular()) files.emplace_back(paths.add(path, false), ino.ref);
              return ino.is_dir();
            },
            walk_options);
        if (files.empty()) throw Error(std::string(arg) + ": no regular file in the image matches");
        for (const auto& [path_id, ref] : files) {
          const std::string path = paths.path(path_id);
          print_or_report([&] {
            reader::Inode file;
            try {
              file = image->read_inode(ref);
            } catch (const Error& e) {
              throw Error(path + ": " + e.what());
            }
            printer.print(file, path);
          });
        }
      });
    }
    return status;
  });
}

RegisterCommand reg("cat", "write files inside an image to standard output", &cat_main);

}  // namespace
}  // namespace sqar::cli
