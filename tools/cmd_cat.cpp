// `sqar cat`: the content of files inside an image, to standard output.
#include <getopt.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "command.h"
#include "common/error.h"
#include "read_common.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar cat [OPTIONS] IMAGE PATH...\n"
    "\n"
    "Write the content of each PATH inside IMAGE to standard output, in order. Symlinks inside\n"
    "the image are followed (absolute targets are taken relative to the image root).\n"
    "\n"
    "Options:\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar cat image.sqfs etc/hostname\n"
    "  sqar cat image.sqfs logs/a.log logs/b.log | grep ERROR\n"
    "  sqar cat image.sqfs big.iso > big.iso\n"
    "\n"
    "Exit status: 0 when every PATH was printed, 1 when one is missing or not a regular file\n"
    "(the others are still printed), 2 on bad usage.\n";

// Resolves PATH, following symlinks inside the image (at most 40, like the kernel).
reader::Inode resolve_file(reader::Image& image, std::string path) {
  for (int hops = 0; hops <= 40; ++hops) {
    auto ino = image.resolve_path(path);
    const std::string shown = path.empty() ? "/" : path;  // the root normalizes to ""
    if (!ino) throw Error(shown + ": not found in the image");
    if (ino->is_regular()) return *ino;
    if (ino->is_dir()) throw Error(shown + ": is a directory");
    if (!ino->is_symlink()) throw Error(shown + ": is not a regular file");
    std::string target = image.read_symlink(*ino);
    if (!target.empty() && target[0] == '/') {
      path = normalize_image_path(target);
    } else {
      size_t slash = path.rfind('/');
      std::string base = slash == std::string::npos ? "" : path.substr(0, slash);
      // Resolve '..' lexically: the image has no other root to escape to.
      std::string joined = base.empty() ? target : base + "/" + target;
      std::string out;
      for (size_t i = 0; i <= joined.size();) {
        size_t j = joined.find('/', i);
        if (j == std::string::npos) j = joined.size();
        std::string comp = joined.substr(i, j - i);
        if (comp == "..") {
          size_t s = out.rfind('/');
          out = s == std::string::npos ? "" : out.substr(0, s);
        } else if (!comp.empty() && comp != ".") {
          out += (out.empty() ? "" : "/") + comp;
        }
        i = j + 1;
      }
      path = out;
    }
  }
  throw Error(path + ": too many levels of symbolic links");
}

void write_all(const uint8_t* p, size_t n) {
  while (n) {
    ssize_t w = ::write(STDOUT_FILENO, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error(std::string("standard output: ") + strerror(errno));
    p += w, n -= size_t(w);
  }
}

int cat_main(int argc, char** argv) {
  return run_guarded("cat", [&] {
    enum { kOffset = 256 };
    static const option longopts[] = {{"offset", required_argument, nullptr, kOffset},
                                      {"help", no_argument, nullptr, 'h'},
                                      {nullptr, 0, nullptr, 0}};
    uint64_t offset = 0;
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", longopts, nullptr)) != -1;) {
      switch (c) {
        case kOffset: offset = parse_offset_arg(optarg); break;
        case 'h': std::fputs(kHelp, stdout); return 0;
        case ':': throw UsageError(std::string("option '") + argv[optind - 1] + "' needs a value");
        default: throw UsageError(std::string("unknown option '") + argv[optind - 1] + "'");
      }
    }
    if (argc - optind < 2) throw UsageError("need IMAGE and at least one PATH");
    std::string image_path = argv[optind++];
    // Blocks are decoded into one buffer (each is read once), so the cache only serves
    // fragment blocks shared by several PATHs.
    auto image = open_image(image_path, offset, 8u << 20);
    std::vector<uint8_t> block(image->super().block_size);
    int status = 0;
    for (; optind < argc; ++optind) {
      try {
        reader::Inode ino = resolve_file(*image, normalize_image_path(argv[optind]));
        uint64_t off = 0;
        for (uint64_t index = 0; off < ino.size; ++index) {
          const size_t n = image->read_block(ino, index, block.data());
          if (n == 0) throw Error(std::string(argv[optind]) + ": content ends before the file size");
          write_all(block.data(), n);
          off += n;
        }
      } catch (const Error& e) {
        if (std::strstr(e.what(), "standard output: ")) throw;
        report("cat", image_path, e.what());
        status = 1;
      }
    }
    return status;
  });
}

RegisterCommand reg("cat", "write files inside an image to standard output", &cat_main);

}  // namespace
}  // namespace sqar::cli
