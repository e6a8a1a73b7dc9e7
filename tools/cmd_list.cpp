// `sqar list`: the entries of an image, like `tar -t` / `tar -tv` and `unsquashfs -lls`.
#include <getopt.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "common/display_name.h"
#include "common/error.h"
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
    "  -l, -v, --long      mode, owner/group, size (major,minor for devices), mtime, path and\n"
    "                      '-> target' for symlinks, like tar -tv (--verbose too); a hard\n"
    "                      link's later names end in 'link to FIRST-NAME', as in tar -tv\n"
    "  -n, --numeric       show numeric uid/gid instead of names (with -l)\n"
    "  -0, --null          end each path with a NUL byte instead of a newline, names as they\n"
    "                      are (for xargs -0); without it control characters (C1 too), '\\'\n"
    "                      and bytes that are not UTF-8 in names are escaped as ls -b and GNU\n"
    "                      tar do ('\\n', '\\t', '\\\\', '\\ooo')\n"
    "      --json          a JSON array on standard output, one object per entry with the keys\n"
    "                      path, type, mode, uid, gid, size, mtime, inode, nlink, and target\n"
    "                      (symlinks) or rdev_major/rdev_minor (devices); see sqar(1)\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar list image.sqfs                  every path\n"
    "  sqar list -l image.sqfs etc           long listing of etc and below\n"
    "  sqar list image.sqfs 'etc/**/*.conf'  every .conf file below etc\n"
    "  sqar list image.sqfs | grep '\\.conf$'\n"
    "\n"
    "A damaged entry is named on stderr and skipped; the others are still listed.\n"
    "\n" SQAR_STDIN_IMAGE_HELP
    "\n"
    "Exit status: 0 on success, 1 when the image is unreadable, an entry is damaged or a PATTERN\n"
    "matches nothing, 2 on bad usage.\n";

enum class Output { text, null, json };

// Stable identifiers for --json (reader::kind_name gives words for messages).
const char* json_type(reader::FileKind k) {
  switch (k) {
    case reader::FileKind::directory: return "directory";
    case reader::FileKind::regular: return "file";
    case reader::FileKind::symlink: return "symlink";
    case reader::FileKind::block_device: return "block_device";
    case reader::FileKind::char_device: return "char_device";
    case reader::FileKind::fifo: return "fifo";
    case reader::FileKind::socket: return "socket";
  }
  return "unknown";
}

// The first name listed of each inode that has several (hard links), so that the later ones
// are shown as tar -tv shows them: "NAME link to FIRST". Bounded: a crafted image may claim a
// link count of 2 for millions of entries with long paths; past the bound, later names are
// shown as plain entries.
class HardLinkNames {
 public:
  // The earlier name of ino's inode, or nullptr when this is the first (now remembered).
  const std::string* earlier_name(const std::string& path, const reader::Inode& ino) {
    if (ino.is_dir() || ino.nlink < 2) return nullptr;
    if (auto it = first_.find(ino.ref); it != first_.end()) return &it->second;
    if (bytes_ + path.size() <= kMaxBytes) {
      bytes_ += path.size() + sizeof(reader::InodeRef);
      first_.emplace(ino.ref, path);
    }
    return nullptr;
  }

 private:
  static constexpr size_t kMaxBytes = size_t(64) << 20;
  std::unordered_map<reader::InodeRef, std::string> first_;
  size_t bytes_ = 0;
};

void print_json_entry(reader::Image& image, const std::string& path, const reader::Inode& ino, bool first) {
  std::string o = std::string(first ? "" : ",\n") + "{\"path\": \"" + json_escape(path) + "\", \"type\": \"" +
                  json_type(ino.kind) + "\", \"mode\": " + std::to_string(ino.mode & 07777) +
                  ", \"uid\": " + std::to_string(ino.uid) + ", \"gid\": " + std::to_string(ino.gid) +
                  ", \"size\": " + std::to_string(ino.size) + ", \"mtime\": " + std::to_string(ino.mtime) +
                  ", \"inode\": " + std::to_string(ino.inode_number) + ", \"nlink\": " + std::to_string(ino.nlink);
  if (ino.is_symlink()) o += ", \"target\": \"" + json_escape(image.read_symlink(ino)) + "\"";
  if (ino.kind == reader::FileKind::block_device || ino.kind == reader::FileKind::char_device)
    o += ", \"rdev_major\": " + std::to_string(ino.rdev_major) + ", \"rdev_minor\": " + std::to_string(ino.rdev_minor);
  o += "}";
  std::fputs(o.c_str(), stdout);
}

// `link_to`: an earlier name of the same inode (long listing only).
void print_entry(reader::Image& image, const std::string& raw_path, const reader::Inode& ino, bool long_format,
                 bool numeric, Output output, const std::string* link_to) {
  const char end = output == Output::null ? '\0' : '\n';
  if (!long_format) {
    const std::string path = output == Output::null ? raw_path : escape_name(raw_path);
    std::fwrite(path.data(), 1, path.size(), stdout);
    std::putchar(end);
    return;
  }
  const std::string path = output == Output::null ? raw_path : escape_name(raw_path);
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
  if (link_to) {
    line += " link to " + (output == Output::null ? *link_to : escape_name(*link_to));
  } else if (ino.is_symlink()) {
    const std::string target = image.read_symlink(ino);
    line += " -> " + (output == Output::null ? target : escape_name(target));
  }
  line += end;
  std::fwrite(line.data(), 1, line.size(), stdout);
}

int list_main(int argc, char** argv) {
  return run_guarded("list", [&] {
    enum { kOffset = 256, kJson };
    static const option longopts[] = {
        {"long", no_argument, nullptr, 'l'},    {"verbose", no_argument, nullptr, 'l'},
        {"numeric", no_argument, nullptr, 'n'}, {"null", no_argument, nullptr, '0'},
        {"json", no_argument, nullptr, kJson},  {"offset", required_argument, nullptr, kOffset},
        {"help", no_argument, nullptr, 'h'},    {nullptr, 0, nullptr, 0}};
    bool long_format = false, numeric = false;
    Output output = Output::text;
    uint64_t offset = 0;
    optind = 1;
    opterr = 0;
    // unsquashfs's listing options, which a user of it types first.
    static const std::vector<ForeignOption> kUnsquashfsListOptions = {
        {"-lls", "-l/--long"},        {"-ls", "-l/--long"}, {"-lc", "-l (every entry)"},
        {"-llc", "-l (every entry)"}, {"-o", "--offset N"}, {"-offset", "--offset N"}};
    reject_foreign_options(argc, argv, ":lvn0h", longopts, kUnsquashfsListOptions, "unsquashfs");
    for (int c; (c = getopt_long(argc, argv, ":lvn0h", longopts, nullptr)) != -1;) {
      switch (c) {
        case 'l':
        case 'v': long_format = true; break;  // -v: as tar -tv
        case 'n': numeric = true; break;
        case '0':
          if (output == Output::json) throw UsageError("-0 and --json are two output formats; choose one");
          output = Output::null;
          break;
        case kJson:
          if (output == Output::null) throw UsageError("-0 and --json are two output formats; choose one");
          output = Output::json;
          break;
        case kOffset: offset = parse_offset_arg(optarg); break;
        case 'h': std::fputs(kHelp, stdout); return 0;
        default: throw_getopt_error(c, argv, longopts);
      }
    }
    if (optind >= argc) throw UsageError("missing IMAGE");
    if (output == Output::json && long_format) throw UsageError("--json already gives what -l (-v) shows");
    std::string image_path = argv[optind++];
    auto image = open_image(image_path, offset);
    PathSelection selection(image_pattern_args(argc, argv, optind));
    bool first = true;
    bool damaged = false;
    HardLinkNames hard_links;
    if (output == Output::json) std::fputs("[\n", stdout);
    image->walk(
        [&](const std::string& path, const reader::Inode& ino) {
          if (!path.empty() && selection.select(path)) {
            if (output == Output::json) {
              print_json_entry(*image, path, ino, first);
            } else {
              const std::string* link_to = long_format ? hard_links.earlier_name(path, ino) : nullptr;
              print_entry(*image, path, ino, long_format, numeric, output, link_to);
            }
            first = false;
          }
          return ino.is_dir() && selection.may_lead_to_match(path);
        },
        reader::WalkOptions{.with_blocks = false, .on_error = [&](const std::string& path, const std::string& error) {
                              // A damaged entry is named and skipped; its siblings are still listed.
                              // One the PATTERNs leave out is not listed either way.
                              if (!selection.select(path) && !selection.may_lead_to_match(path)) return;
                              flush_standard_output();
                              report("list", image_path, path + ": " + without_path_prefix(error, image_path));
                              damaged = true;
                            }});
    if (output == Output::json) std::fputs(first ? "]\n" : "\n]\n", stdout);
    int status = damaged ? 1 : 0;
    for (const auto& p : selection.unmatched()) {
      report("list", image_path, p + ": not found in the image");
      status = 1;
    }
    return status;
  });
}

RegisterCommand reg("list", "list the entries of an image (-l: long listing)", &list_main);

}  // namespace
}  // namespace sqar::cli
