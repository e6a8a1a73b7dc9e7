// `sqar list`: the entries of an image, like `tar -t` / `tar -tv` and `unsquashfs -lls`.
#include <getopt.h>

#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "common/path_pattern.h"
#include "ops/entry_format.h"
#include "read_common.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar list [OPTIONS] IMAGE [PATTERN...]\n"
    "\n"
    "Print the paths of the entries in IMAGE, one a line, parents before their contents. With\n"
    "PATTERNs only the entries they match and what lies below them, selected as by extract:\n"
    "*, ? and [...] stay within one path component, a '**' component spans any number of them\n"
    "('etc/**/*.conf'). Reads metadata only: fast on any image size.\n"
    "\n"
    "Options:\n"
    "  -l, --long          mode, owner/group, size (major,minor for devices), mtime, path and\n"
    "                      '-> target' for symlinks, like tar -tv\n"
    "  -n, --numeric       show numeric uid/gid instead of names (with -l)\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar list image.sqfs                  every path\n"
    "  sqar list -l image.sqfs etc           long listing of etc and below\n"
    "  sqar list image.sqfs 'etc/**/*.conf'  every .conf file below etc\n"
    "  sqar list image.sqfs | grep '\\.conf$'\n"
    "\n"
    "Exit status: 0 on success, 1 when the image is unreadable or a PATTERN matches nothing, 2 on\n"
    "bad usage.\n";

void print_entry(reader::Image& image, const std::string& path, const reader::Inode& ino, bool long_format,
                 bool numeric) {
  if (!long_format) {
    std::printf("%s\n", path.c_str());
    return;
  }
  std::string owner = numeric ? std::to_string(ino.uid) + "/" + std::to_string(ino.gid)
                              : ops::user_name(ino.uid) + "/" + ops::group_name(ino.gid);
  std::string size = (ino.kind == reader::FileKind::block_device || ino.kind == reader::FileKind::char_device)
                         ? std::to_string(ino.rdev_major) + "," + std::to_string(ino.rdev_minor)
                         : std::to_string(ino.size);
  std::string line = ops::mode_string(ino.mode) + " " + owner + " ";
  // Pad owner+size to a common width like tar does, so columns line up.
  size_t width = 26;
  size_t used = owner.size() + 1 + size.size();
  if (used < width) line.append(width - used, ' ');
  line += size + " " + ops::format_mtime(ino.mtime) + " " + path;
  if (ino.is_symlink()) line += " -> " + image.read_symlink(ino);
  std::printf("%s\n", line.c_str());
}

int list_main(int argc, char** argv) {
  return run_guarded("list", [&] {
    enum { kOffset = 256 };
    static const option longopts[] = {{"long", no_argument, nullptr, 'l'},
                                      {"numeric", no_argument, nullptr, 'n'},
                                      {"offset", required_argument, nullptr, kOffset},
                                      {"help", no_argument, nullptr, 'h'},
                                      {nullptr, 0, nullptr, 0}};
    bool long_format = false, numeric = false;
    uint64_t offset = 0;
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":lnh", longopts, nullptr)) != -1;) {
      switch (c) {
        case 'l': long_format = true; break;
        case 'n': numeric = true; break;
        case kOffset: offset = parse_offset_arg(optarg); break;
        case 'h': std::fputs(kHelp, stdout); return 0;
        case ':': throw UsageError(std::string("option '") + argv[optind - 1] + "' needs a value");
        default: throw UsageError(std::string("unknown option '") + argv[optind - 1] + "'");
      }
    }
    if (optind >= argc) throw UsageError("missing IMAGE");
    std::string image_path = argv[optind++];
    auto image = open_image(image_path, offset);
    PathSelection selection(image_pattern_args(argc, argv, optind));
    image->walk([&](const std::string& path, const reader::Inode& ino) {
      if (!path.empty() && selection.select(path)) print_entry(*image, path, ino, long_format, numeric);
      return ino.is_dir() && selection.may_lead_to_match(path);
    });
    int status = 0;
    for (const auto& p : selection.unmatched()) {
      report("list", image_path, p + ": not found in the image");
      status = 1;
    }
    if (std::fflush(stdout) != 0) throw std::runtime_error("writing the listing failed");
    return status;
  });
}

RegisterCommand reg("list", "list the entries of an image (-l: long listing)", &list_main);

}  // namespace
}  // namespace sqar::cli
