// `sqar info`: what an image holds and how it was built, from metadata only.
#include <getopt.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "common/display_name.h"
#include "format/squashfs.h"
#include "ops/data_key.h"
#include "ops/manifest_check.h"
#include "read_common.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar info [OPTIONS] IMAGE\n"
    "\n"
    "Describe a SquashFS image: compressor and its options, block size, entry counts by type,\n"
    "sizes and compression ratio, how much file content is shared between files (dedup),\n"
    "fragments, flags, and whether sqar's manifest trailer (content XXH3-128s) is present.\n"
    "Reads metadata only, never file data: a fraction of a second even for 200k entries.\n"
    "\n"
    "Options:\n"
    "      --json          one JSON object instead of text (stable keys, for scripts)\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar info image.sqfs\n"
    "  sqar info --json image.sqfs | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"ratio\"])'\n"
    "\n"
    "Dedup savings count the content bytes of files whose data (same block list, or same tail\n"
    "fragment) is stored once but referenced by more than one inode; hard links are not dedup.\n"
    "\n" SQAR_STDIN_IMAGE_HELP
    "\n"
    "Exit status: 0 on success, 1 when the image is unreadable, 2 on bad usage.\n";

struct Stats {
  uint64_t counts[7] = {};  // indexed by reader::FileKind
  uint64_t hard_links = 0;  // extra names of an inode already seen
  uint64_t file_bytes = 0;  // content bytes of distinct regular inodes
  uint64_t sparse_bytes = 0;
  uint64_t shared_bytes = 0;  // dedup savings
  uint64_t shared_files = 0;  // inodes whose data is shared with an earlier one
  uint64_t xattr_entries = 0;
};

Stats collect(reader::Image& image) {
  Stats s;
  std::unordered_set<uint32_t> seen_inodes;
  std::map<ops::DataKey, int> data_seen;
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, int> tail_seen;
  const uint64_t block = image.super().block_size;
  image.walk(
      [&](const std::string&, const reader::Inode& ino) {
        ++s.counts[size_t(ino.kind)];
        if (!ino.is_dir() && !seen_inodes.insert(ino.inode_number).second) {
          ++s.hard_links;
          return true;
        }
        if (ino.xattr_index != fmt::kNoXattr) ++s.xattr_entries;
        if (!ino.is_regular()) return true;
        s.file_bytes += ino.size;
        s.sparse_bytes += ino.sparse_bytes;
        ops::DataKey key(image, ino);
        if (!key.stores_data) return true;  // empty or all-sparse files share nothing
        if (data_seen[key]++) {
          s.shared_bytes += ino.size;
          ++s.shared_files;
        } else if (ino.fragment_index != fmt::kNoFragment) {
          uint64_t tail = ino.size % block;
          if (tail_seen[{ino.fragment_index, ino.fragment_offset, tail}]++) s.shared_bytes += tail;
        }
        return true;
      },
      reader::WalkOptions{.with_blocks = false, .on_error = {}});
  return s;
}

// The level the image's data was compressed at, when it is known: sqar's settings trailer
// says it for every compressor; without one, only gzip's, zstd's and lzo's options (or the
// format's defaults) say it, and xz's and lz4's options hold none.
// Not options_block_tells_level(), which says whether the level is certain enough for --reuse
// (a stored gzip 9 may stand for sqar's 10-12; plain lz4 counts as level 0): info shows the
// level the image states, and none for lz4.
std::optional<int> known_level(reader::Image& image) {
  const CodecConfig& c = image.codec_config();
  try {
    if (image.settings_trailer()) return c.level;
  } catch (const std::exception&) {
  }
  if (c.id == CodecId::gzip || c.id == CodecId::zstd || c.id == CodecId::lzo) return c.level;
  return std::nullopt;
}

// The xz options' BCJ filter bits (squashfs-tools' order), by name; unknown bits in hex.
std::string bcj_filter_names(uint32_t flags) {
  static const char* const kNames[] = {"x86", "powerpc", "ia64", "arm", "armthumb", "sparc"};
  std::string out;
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (flags & (1u << i)) out += (out.empty() ? "" : "+") + std::string(kNames[i]);
  if (const uint32_t rest = flags & ~((1u << std::size(kNames)) - 1)) {
    char b[16];
    std::snprintf(b, sizeof b, "0x%x", rest);
    out += (out.empty() ? "" : "+") + std::string(b);
  }
  return out;
}

std::string codec_options(reader::Image& image, std::optional<int> level) {
  const CodecConfig& c = image.codec_config();
  bool stored = image.super().flags & fmt::kFlagCompressorOptions;
  const std::string level_text = level ? "level " + std::to_string(*level) + ", " : "";
  std::string out;
  switch (c.id) {
    case CodecId::gzip: out = level_text + "window " + std::to_string(c.gzip_window); break;
    case CodecId::zstd: out = "level " + std::to_string(c.level); break;
    case CodecId::xz:
      out = level_text + "dictionary " + std::to_string(c.xz_dict_size ? c.xz_dict_size : c.block_size) +
            (c.xz_filters ? ", BCJ filters " + bcj_filter_names(c.xz_filters) : "");
      break;
    case CodecId::lzo: {
      // squashfs-tools' numbering; only lzo1x_999 has levels.
      static const char* const kAlgorithms[] = {"lzo1x_1", "lzo1x_1_11", "lzo1x_1_12", "lzo1x_1_15", "lzo1x_999"};
      out = c.lzo_algorithm < std::size(kAlgorithms) ? kAlgorithms[c.lzo_algorithm]
                                                     : "algorithm " + std::to_string(c.lzo_algorithm);
      if (c.lzo_algorithm == 4) out += ", level " + std::to_string(c.level);
      break;
    }
    case CodecId::lz4: out = c.lz4_hc ? level_text + "high compression" : "default"; break;
    default: out = "";
  }
  out += stored ? "" : (out.empty() ? "defaults" : "; defaults: no options block");
  try {
    const auto settings = image.settings_trailer();
    if (settings && settings->mixed) out += "; some blocks at other levels, from append -l, merge or --reuse";
  } catch (const std::exception&) {
  }
  return out;
}

int info_main(int argc, char** argv) {
  return run_guarded("info", [&] {
    enum { kOffset = 256, kJson };
    static const option longopts[] = {{"json", no_argument, nullptr, kJson},
                                      {"offset", required_argument, nullptr, kOffset},
                                      {"help", no_argument, nullptr, 'h'},
                                      {nullptr, 0, nullptr, 0}};
    bool json = false;
    uint64_t offset = 0;
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", longopts, nullptr)) != -1;) {
      switch (c) {
        case kJson: json = true; break;
        case kOffset: offset = parse_offset_arg(optarg); break;
        case 'h': std::fputs(kHelp, stdout); return 0;
        default: throw_getopt_error(c, argv, longopts);
      }
    }
    if (argc - optind != 1) throw UsageError("need exactly one IMAGE");
    std::string image_path = argv[optind];
    auto image = open_image(image_path, offset);
    const reader::Superblock& sb = image->super();
    Stats s = collect(*image);
    // A damaged trailer does not hide the rest: info is what users reach for to look at a bad
    // image. It is described as damaged, and the status is 1.
    std::optional<Manifest> manifest;
    std::string trailer_problem;
    try {
      manifest = image->manifest();
    } catch (const std::exception& e) {
      trailer_problem = ops::manifest_trailer_problem(e, image->path());
    }
    auto status = [&] {
      if (trailer_problem.empty()) return 0;
      flush_standard_output();
      report("info", image_path, trailer_problem);
      return 1;
    };
    double ratio = s.file_bytes ? double(sb.bytes_used) / double(s.file_bytes) : 0.0;
    const char* kinds[] = {"directory", "regular", "symlink", "block_device", "char_device", "fifo", "socket"};
    auto count = [&](const char* k) {
      for (size_t i = 0; i < 7; ++i)
        if (!std::strcmp(kinds[i], k)) return s.counts[i];
      return uint64_t(0);
    };
    bool has_xattrs = sb.xattr_table_start != fmt::kTableAbsent;
    const std::optional<int> level = known_level(*image);
    if (json) {
      std::printf(
          "{\"image\":\"%s\",\"offset\":%llu,\"version\":\"%u.%u\",\"compressor\":\"%s\",\"compressor_options\":\"%s\","
          "\"level\":%s,\"block_size\":%u,\"inodes\":%u,\"ids\":%u,\"mkfs_time\":%u,",
          json_escape(image_path).c_str(), (unsigned long long)offset, sb.version_major, sb.version_minor,
          codec_name(sb.compressor), json_escape(codec_options(*image, level)).c_str(),
          level ? std::to_string(*level).c_str() : "null", sb.block_size, sb.inode_count, sb.id_count, sb.mod_time);
      std::printf("\"counts\":{");
      for (size_t i = 0; i < 7; ++i)
        std::printf("%s\"%s\":%llu", i ? "," : "", kinds[i], (unsigned long long)count(kinds[i]));
      std::printf(",\"hard_links\":%llu},", (unsigned long long)s.hard_links);
      std::printf(
          "\"image_bytes\":%llu,\"file_size\":%llu,\"file_bytes\":%llu,\"sparse_bytes\":%llu,\"ratio\":%.4f,"
          "\"dedup_saved_bytes\":%llu,\"dedup_files\":%llu,\"fragments\":%u,",
          (unsigned long long)sb.bytes_used, (unsigned long long)image->file_size(), (unsigned long long)s.file_bytes,
          (unsigned long long)s.sparse_bytes, ratio, (unsigned long long)s.shared_bytes,
          (unsigned long long)s.shared_files, sb.fragment_count);
      std::printf(
          "\"manifest\":%s,\"manifest_version\":%u,\"manifest_entries\":%llu,\"manifest_fragment_digests\":%llu,"
          "\"exportable\":%s,\"xattrs\":%"
          "s,\"entries_with_xattrs\":%llu,"
          "\"flags\":%u",
          manifest ? "true" : "false", manifest ? manifest->version : 0u,
          (unsigned long long)(manifest ? manifest->files.size() : 0),
          (unsigned long long)(manifest ? manifest->fragment_digests.size() : 0),
          image->has_export_table() ? "true" : "false", has_xattrs ? "true" : "false",
          (unsigned long long)s.xattr_entries, sb.flags);
      if (!trailer_problem.empty()) std::printf(",\"manifest_problem\":\"%s\"", json_escape(trailer_problem).c_str());
      std::printf("}\n");
      return status();
    }
    std::printf("Image:            %s%s\n", printable(image_path).c_str(),
                offset ? (" (at offset " + std::to_string(offset) + ")").c_str() : "");
    time_t made = time_t(sb.mod_time);
    struct tm tm {};
    gmtime_r(&made, &tm);
    char when[40];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    std::printf("Format:           SquashFS %u.%u, created %s\n", sb.version_major, sb.version_minor, when);
    std::printf("Compressor:       %s (%s)\n", codec_name(sb.compressor), codec_options(*image, level).c_str());
    std::printf("Block size:       %s (%u)\n", human_bytes(sb.block_size).c_str(), sb.block_size);
    // The counts are names (a hard-linked file counts once per name, as `find` does); the
    // inode count is the image's own.
    uint64_t names = 0;
    for (uint64_t c : s.counts) names += c;
    std::printf("Entries:          %s: %s, %s, %s, %s, %s, %s, %s; %s (%s)\n", counted(names, "name", "names").c_str(),
                counted(count("directory"), "directory", "directories").c_str(),
                counted(count("regular"), "file", "files").c_str(),
                counted(count("symlink"), "symlink", "symlinks").c_str(),
                counted(count("block_device"), "block device", "block devices").c_str(),
                counted(count("char_device"), "char device", "char devices").c_str(),
                counted(count("fifo"), "fifo", "fifos").c_str(), counted(count("socket"), "socket", "sockets").c_str(),
                counted(sb.inode_count, "inode", "inodes").c_str(),
                counted(s.hard_links, "extra hard link", "extra hard links").c_str());
    std::printf("Image size:       %s (%llu bytes used; file %llu bytes)\n", human_bytes(sb.bytes_used).c_str(),
                (unsigned long long)sb.bytes_used, (unsigned long long)image->file_size());
    std::printf("File content:     %s (%llu bytes, %llu of them sparse)\n", human_bytes(s.file_bytes).c_str(),
                (unsigned long long)s.file_bytes, (unsigned long long)s.sparse_bytes);
    std::printf("Ratio:            %.1f%% (image / file content)\n", ratio * 100);
    std::printf(
        "Dedup savings:    %s (%llu bytes; %s earlier files' data)\n", human_bytes(s.shared_bytes).c_str(),
        (unsigned long long)s.shared_bytes,
        (s.shared_files == 1 ? std::string("1 file shares") : std::to_string(s.shared_files) + " files share").c_str());
    std::printf("Fragments:        %u\n", sb.fragment_count);
    std::printf("Ids:              %u\n", sb.id_count);
    std::printf("Exportable:       %s\n", image->has_export_table() ? "yes (NFS export table)" : "no");
    std::printf("Xattrs:           %s\n",
                has_xattrs ? ("yes, on " + counted(s.xattr_entries, "entry", "entries")).c_str() : "no");
    std::string trailer = "no";
    if (manifest) {
      // Version 4 hashes each 64 KiB chunk, then the chunk digests (format/manifest.h).
      const std::string hashes = "yes (version " + std::to_string(manifest->version) + "), " +
                                 (manifest->scheme() == HashScheme::kChunked ? "chunked XXH3-128" : "XXH3-128") +
                                 " of ";
      if (!manifest->has_fragment_digests()) {
        trailer = hashes + counted(manifest->files.size(), "file", "files");
      } else {
        trailer = hashes + counted(manifest->files.size(), "file", "files") +
                  " with full blocks, and of the small files in each of " +
                  counted(manifest->fragment_digests.size(), "fragment block", "fragment blocks");
      }
    }
    if (!trailer_problem.empty()) trailer = "damaged (" + trailer_problem + ")";
    std::printf("Manifest trailer: %s\n", printable(trailer).c_str());
    return status();
  });
}

RegisterCommand reg("info", "describe an image: compressor, counts, sizes, dedup", &info_main);

}  // namespace
}  // namespace sqar::cli
