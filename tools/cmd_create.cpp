// `sqar create`: pack directory trees into a SquashFS image.
#include <getopt.h>
#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "common/error.h"
#include "reader/image.h"
#include "status_line.h"
#include "writer/create.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar create [OPTIONS] SOURCE... IMAGE\n"
    "       sqar create --tar ARCHIVE|- [OPTIONS] IMAGE\n"
    "\n"
    "Pack one or more directories into a SquashFS 4.0 image that the Linux kernel, unsquashfs,\n"
    "squashfuse and sqarfs can read. Identical files are found by content (XXH3-128) before\n"
    "compression and stored once.\n"
    "\n"
    "As with mksquashfs, one SOURCE directory becomes the image root; with several SOURCEs (or a\n"
    "single file) each SOURCE is an entry of the root under its own name: 'sqar create /etc\n"
    "/var/log img' stores /etc and /log. Two SOURCEs with the same name are an error.\n"
    "A SOURCE that is a symlink to a directory is stored as the symlink (with a warning); write\n"
    "it with a trailing '/' to pack the directory it points to, as rsync reads it (beside other\n"
    "SOURCEs, under that directory's own name).\n"
    "\n"
    "Compression:\n"
    "  -c, --compressor NAME   gzip, xz, lzo, lz4 or zstd (default zstd)\n"
    "  -l, --level N           compression level (zstd 1-22, default 9; gzip 1-12, default 9,\n"
    "                          10-12 smaller than zlib's 9 and slower; xz 0-9, default 6;\n"
    "                          lzo 1-9, default 8; lz4 0 fast or 1-12 HC)\n"
    "  -b, --block-size SIZE   data block size, a power of two from 4K to 1M (default 128K)\n"
    "  -j, --threads N         worker threads (default, and 0: all cores); the image is the same for\n"
    "                          any N (byte for byte once its time is fixed: SOURCE_DATE_EPOCH)\n"
    "                          Listing directories adds threads while it waits for the disk\n"
    "\n"
    "Content:\n"
    "      --tar ARCHIVE       pack a tar archive ('-': standard input) instead of SOURCEs: pax,\n"
    "                          GNU, ustar or v7, plain or compressed (gzip, xz, zstd, bzip2, lz4,\n"
    "                          ...), read once. Members keep modes, numeric owners, times, links,\n"
    "                          devices, holes and xattrs; leading '/' is dropped, '..' that climbs\n"
    "                          out is an error; the last of duplicate members wins (a warning).\n"
    "                          Directories no member names are made 0755 with the owner and time\n"
    "                          of the first member below them (the root: of the first member)\n"
    "      --tar-memory SIZE   with --tar: content kept in memory before the rest goes to an\n"
    "                          unlinked scratch file beside IMAGE (default 256M). Content already\n"
    "                          seen is never kept twice\n"
    "      --exclude GLOB      leave out matching entries (repeatable). A GLOB with '/' inside or\n"
    "                          in front matches the path in the image ('build/*.o', '/build' is\n"
    "                          the top-level build only), one without matches names at any\n"
    "                          depth ('*.tmp'); a trailing '/' matches directories only.\n"
    "                          A GLOB that starts with a SOURCE's path ('/var/log/journal' with\n"
    "                          SOURCE /var/log) is taken as the path below it ('/journal'); one\n"
    "                          with '/' that excludes nothing gets a warning naming the image path\n"
    "                          it probably meant\n"
    "      --exclude-from FILE read GLOBs from FILE, one a line ('#' starts a comment; '-':\n"
    "                          standard input)\n"
    "      --keep-as-directory store a single SOURCE directory under its own name instead of\n"
    "                          making it the root (as mksquashfs -keep-as-directory)\n"
    "      --one-file-system   do not descend into directories on other filesystems\n"
    "      --no-xattrs         do not store extended attributes\n"
    "      --all-root          make every entry owned by root (same as --uid 0 --gid 0)\n"
    "      --uid N, --gid N    make every entry owned by this user / group (an id, or a name\n"
    "                          of this machine, stored as its id)\n"
    "      --mtime SECONDS     set every timestamp to SECONDS since the epoch\n"
    "                          (SOURCE_DATE_EPOCH in the environment clamps timestamps to it and\n"
    "                          sets the image time, for reproducible images)\n"
    "      --skip-unreadable   warn about unreadable files and directories instead of failing\n"
    "      --strict            fail when a file changes while it is read. By default a file that\n"
    "                          grows is stored as its first N bytes (N: its size when scanned),\n"
    "                          one that shrinks as the bytes it still has, one that vanishes (or\n"
    "                          becomes a FIFO, a symlink, a directory) is left out, a directory\n"
    "                          that vanishes too, each with a warning, and the exit status stays\n"
    "                          0; a file replaced after the scan is stored with the mode, owner\n"
    "                          and time of the file whose content is stored\n"
    "\n"
    "Dedup and extras:\n"
    "      --no-dedup          store every file separately\n"
    "      --verify-dedup      byte-compare files with equal hashes before sharing their data\n"
    "      --reuse OLD         copy the compressed blocks of files whose content OLD (an earlier\n"
    "                          image with the same compressor, level and block size) holds, and\n"
    "                          fragment blocks it has, instead of compressing them again. Each\n"
    "                          copied block is checked against the source first; with an OLD made\n"
    "                          by sqar create (with its trailers, of one level) the image is the\n"
    "                          same as without it. OLD may be IMAGE itself (with --force), or made\n"
    "                          by mksquashfs or with --no-manifest (its files are then decoded and\n"
    "                          hashed first). Blocks copied from an OLD whose level is unknown\n"
    "                          (those two) or mixed (append -l, merge) mark the image as of mixed\n"
    "                          levels. -c, -l and -b default to OLD's. An OLD that does not exist\n"
    "                          or cannot be read gives a fresh build and a one-line note (a\n"
    "                          nightly job's first night)\n"
    "      --reuse-strict      with --reuse: an OLD that does not exist or cannot be read is an\n"
    "                          error\n"
    "      --no-manifest       omit the trailer of content XXH3-128 hashes (used by sqar verify)\n"
    "      --no-export         omit the NFS export table\n"
    "\n"
    "Output:\n"
    "  -f, --force             overwrite IMAGE if it exists (never appends)\n"
    "  -q, --quiet             no progress bar and no summary\n"
    "      --progress          show the progress bar even when stderr is not a terminal\n"
    "      --json              summary as JSON on stdout instead of the text summary\n"
    "  -h, --help              show this help\n"
    "\n"
    "The image is written to a temporary file beside IMAGE and renamed when complete; on any\n"
    "error or interruption no partial image is left behind. IMAGE '-' writes the image to\n"
    "standard output: it is built in an unnamed file in $TMPDIR (default /tmp), which needs\n"
    "room for it, and copied out once complete, so a failed build writes nothing.\n"
    "\n"
    "Examples:\n"
    "  sqar create /var/log logs.sqfs                      # zstd-9, 128K blocks, all cores\n"
    "  sqar create -c xz -b 1M --all-root ports/ ports.sqfs\n"
    "  sqar create --exclude '*.o' --exclude .git/ src/ src.sqfs\n"
    "  sqar create --tar release.tar.zst release.sqfs          # or: tar -c dir | sqar create --tar - img\n"
    "  sqar create -q /srv/www - | ssh backup 'cat > www.sqfs'\n"
    "  sqar create --force --reuse logs.sqfs /var/log logs.sqfs   # nightly, with logs.sqfs's settings\n"
    "  SOURCE_DATE_EPOCH=1700000000 sqar create tree/ reproducible.sqfs   # same bytes for any -j\n"
    "\n"
    "Exit status: 0 when the image was written (warnings about changing or skipped files\n"
    "included), 1 when it was not, 2 on bad usage.\n";

// What the status line shows in each phase of a build.
std::string create_status(const CreateProgress& p, double secs) {
  switch (p.phase.load()) {
    case CreatePhase::scanning: return "scanning: " + std::to_string(p.entries.load()) + " entries";
    case CreatePhase::data: return progress_bar(p.bytes_done.load(), p.bytes_total.load(), secs);
    case CreatePhase::indexing_reuse: return "indexing the image to reuse...";
    case CreatePhase::metadata:
    case CreatePhase::done: break;
  }
  return "writing tables...";
}

// On standard error: stdout is for data, and --json puts the summary there when asked.
void print_summary(const CreateOptions& opt, const CreateStats& s) {
  const auto& d = s.data;
  double ratio = d.bytes_in ? double(s.image_bytes) / double(d.bytes_in) : 0;
  std::fprintf(
      stderr, "%s: %s (%s, %s, %s, %s, %llu other)\n", opt.image == "-" ? "standard output" : opt.image.c_str(),
      counted(s.entries, "entry", "entries").c_str(), counted(s.files, "file", "files").c_str(),
      counted(s.directories, "dir", "dirs").c_str(), counted(s.symlinks, "symlink", "symlinks").c_str(),
      counted(s.hardlinks, "hard link", "hard links").c_str(), (unsigned long long)(s.devices + s.fifos + s.sockets));
  std::fprintf(stderr, "  in %s -> image %s (%.1f%% of input), %s %s-%d, %s blocks\n", human_bytes(d.bytes_in).c_str(),
               human_bytes(s.image_bytes).c_str(), ratio * 100, "compressor", codec_name(opt.data.codec.id),
               opt.data.codec.level, human_bytes(opt.data.codec.block_size).c_str());
  std::fprintf(stderr, "  dedup: %s, %s saved (+%s identical tails); %s never compressed\n",
               counted(d.dedup_files, "duplicate file", "duplicate files").c_str(), human_bytes(d.dedup_bytes).c_str(),
               human_bytes(d.tail_dedup_bytes).c_str(), human_bytes(d.dedup_bytes).c_str());
  std::fprintf(stderr, "  blocks: %llu compressed, %llu stored raw (%llu detected incompressible), %llu sparse, %s\n",
               (unsigned long long)d.blocks_compressed, (unsigned long long)(d.blocks_raw + d.blocks_incompressible),
               (unsigned long long)d.blocks_incompressible, (unsigned long long)d.blocks_sparse,
               counted(d.fragments, "fragment block", "fragment blocks").c_str());
  // Nothing taken from OLD (missing, made otherwise, or no content in common): the note or
  // warning about it has said so already.
  if (!opt.reuse.empty() && (d.blocks_reused || d.fragments_reused || d.reuse_mismatches)) {
    std::string mismatches;
    if (d.reuse_mismatches)
      mismatches = ", " + std::to_string(d.reuse_mismatches) + " did not match the source and were compressed";
    std::fprintf(stderr, "  reused: %llu blocks and %llu fragment blocks (%s) copied from %s%s\n",
                 (unsigned long long)d.blocks_reused, (unsigned long long)d.fragments_reused,
                 human_bytes(d.reused_bytes).c_str(), opt.reuse.c_str(), mismatches.c_str());
  }
  std::fprintf(stderr, "  time %.2f s, %s/s\n", s.seconds,
               human_bytes(uint64_t(double(d.bytes_in) / std::max(s.seconds, 1e-6))).c_str());
}

// The keys name what the text summary says: blocks_stored_raw counts every block stored
// uncompressed, blocks_incompressible those of them the entropy check caught before compressing.
void print_json(const CreateOptions& opt, const CreateStats& s) {
  const auto& d = s.data;
  std::printf(
      "{\"image\":\"%s\",\"compressor\":\"%s\",\"level\":%d,\"block_size\":%u,\"threads\":%u,"
      "\"entries\":%llu,\"files\":%llu,\"directories\":%llu,\"symlinks\":%llu,\"hardlinks\":%llu,"
      "\"devices\":%llu,\"fifos\":%llu,\"sockets\":%llu,\"inodes\":%u,"
      "\"bytes_in\":%llu,\"bytes_read\":%llu,\"image_bytes\":%llu,\"file_bytes\":%llu,\"ratio\":%.6f,"
      "\"dedup_files\":%llu,\"dedup_bytes\":%llu,\"tail_dedup_bytes\":%llu,\"codec_input_bytes\":%llu,"
      "\"blocks_compressed\":%llu,\"blocks_stored_raw\":%llu,\"blocks_incompressible\":%llu,\"blocks_sparse\":%llu,"
      "\"blocks_reused\":%llu,\"fragments_reused\":%llu,\"reused_bytes\":%llu,\"reuse_mismatches\":%llu,"
      "\"fragments\":%llu,\"xattr_sets\":%llu,\"seconds\":%.3f,\"scan_seconds\":%.3f,\"data_seconds\":%.3f,"
      "\"metadata_seconds\":%.3f,\"scan_listers\":%u}\n",
      json_escape(opt.image).c_str(), codec_name(opt.data.codec.id), opt.data.codec.level, opt.data.codec.block_size,
      opt.threads, (unsigned long long)s.entries, (unsigned long long)s.files, (unsigned long long)s.directories,
      (unsigned long long)s.symlinks, (unsigned long long)s.hardlinks, (unsigned long long)s.devices,
      (unsigned long long)s.fifos, (unsigned long long)s.sockets, s.inodes, (unsigned long long)d.bytes_in,
      (unsigned long long)d.bytes_read, (unsigned long long)s.image_bytes, (unsigned long long)s.file_bytes,
      d.bytes_in ? double(s.image_bytes) / double(d.bytes_in) : 0.0, (unsigned long long)d.dedup_files,
      (unsigned long long)d.dedup_bytes, (unsigned long long)d.tail_dedup_bytes,
      (unsigned long long)d.codec_input_bytes, (unsigned long long)d.blocks_compressed,
      (unsigned long long)(d.blocks_raw + d.blocks_incompressible), (unsigned long long)d.blocks_incompressible,
      (unsigned long long)d.blocks_sparse, (unsigned long long)d.blocks_reused, (unsigned long long)d.fragments_reused,
      (unsigned long long)d.reused_bytes, (unsigned long long)d.reuse_mismatches, (unsigned long long)d.fragments,
      (unsigned long long)s.xattr_sets, s.seconds, s.scan_seconds, s.data_seconds, s.metadata_seconds, s.scan_listers);
}

// `--reuse OLD` copies blocks only when this build's compressor, options and block size are
// OLD's, so whatever the command line leaves open is taken from OLD: `sqar create --reuse
// logs.sqfs /var/log logs.sqfs` rebuilds with the settings logs.sqfs was made with.
void take_open_settings_from(const std::string& old_image, CodecConfig& codec, bool compressor_given, bool& level_given,
                             bool block_given) {
  std::unique_ptr<reader::Image> old;
  try {
    old = reader::Image::open(old_image);
  } catch (const std::exception&) {
    return;  // the build reports it, naming OLD
  }
  if (!block_given) codec.block_size = old->super().block_size;
  const CodecConfig& o = old->codec_config();
  if (!codec_can_write(o.id) || (compressor_given && codec.id != o.id)) return;
  codec.id = o.id;
  if (level_given) return;
  // Each setting left open is OLD's, also when -b changes the block size (and so turns reuse
  // off): a nightly job that changes only -b keeps its level.
  const uint32_t block_size = codec.block_size;
  codec = o;  // level and the codec's extras (gzip window, xz dictionary, lz4 hc, lzo algorithm)
  // xz's dictionary follows the block size unless given: OLD's was sized to OLD's blocks.
  if (block_size != codec.block_size) codec.xz_dict_size = 0;
  codec.block_size = block_size;
  // lz4's options block says only "high compression", not its level: take lz4hc's default.
  if (codec.id == CodecId::lz4 && codec.lz4_hc && codec.level <= 0) codec.level = 9;
  level_given = true;
  // Only sqar's settings trailer records xz's and lz4's level, and gzip's 10-12 (stored as 9).
  bool has_trailer = false;
  try {
    has_trailer = old->settings_trailer().has_value();
  } catch (const std::exception&) {
  }
  if (!has_trailer && !options_block_tells_level(codec))
    print_message("sqar create: note: " + old_image + " does not record its " + codec_name(codec.id) +
                  " level (no settings trailer: --no-manifest, or another tool's image); using level " +
                  std::to_string(resolved_level(codec)) + ", which -l changes");
}

int run_create(int argc, char** argv) {
  enum {
    kExclude = 256,
    kExcludeFrom,
    kOneFs,
    kNoXattrs,
    kAllRoot,
    kUid,
    kGid,
    kMtime,
    kSkipUnreadable,
    kNoDedup,
    kVerifyDedup,
    kReuse,
    kNoManifest,
    kNoExport,
    kProgress,
    kJson,
    kStrict,
    kReuseStrict,
    kKeepAsDirectory,
    kTar,
    kTarMemory
  };
  static const option longopts[] = {{"compressor", required_argument, nullptr, 'c'},
                                    {"level", required_argument, nullptr, 'l'},
                                    {"block-size", required_argument, nullptr, 'b'},
                                    {"threads", required_argument, nullptr, 'j'},
                                    {"force", no_argument, nullptr, 'f'},
                                    {"quiet", no_argument, nullptr, 'q'},
                                    {"help", no_argument, nullptr, 'h'},
                                    {"exclude", required_argument, nullptr, kExclude},
                                    {"exclude-from", required_argument, nullptr, kExcludeFrom},
                                    {"one-file-system", no_argument, nullptr, kOneFs},
                                    {"no-xattrs", no_argument, nullptr, kNoXattrs},
                                    {"all-root", no_argument, nullptr, kAllRoot},
                                    {"uid", required_argument, nullptr, kUid},
                                    {"gid", required_argument, nullptr, kGid},
                                    {"mtime", required_argument, nullptr, kMtime},
                                    {"skip-unreadable", no_argument, nullptr, kSkipUnreadable},
                                    {"strict", no_argument, nullptr, kStrict},
                                    {"keep-as-directory", no_argument, nullptr, kKeepAsDirectory},
                                    {"no-dedup", no_argument, nullptr, kNoDedup},
                                    {"verify-dedup", no_argument, nullptr, kVerifyDedup},
                                    {"reuse", required_argument, nullptr, kReuse},
                                    {"reuse-strict", no_argument, nullptr, kReuseStrict},
                                    {"no-manifest", no_argument, nullptr, kNoManifest},
                                    {"no-export", no_argument, nullptr, kNoExport},
                                    {"progress", no_argument, nullptr, kProgress},
                                    {"json", no_argument, nullptr, kJson},
                                    {"tar", required_argument, nullptr, kTar},
                                    {"tar-memory", required_argument, nullptr, kTarMemory},
                                    {nullptr, 0, nullptr, 0}};
  CreateOptions opt;
  bool quiet = false, json = false, force_progress = false, level_given = false;
  bool tar_memory_given = false;
  std::vector<std::string> exclude_files;
  bool compressor_given = false, block_given = false;
  optind = 1;
  opterr = 0;  // our own messages, as the other commands give them
  int c;
  reject_foreign_options(argc, argv, ":c:l:b:j:fqh", longopts, kMksquashfsOptions, "mksquashfs");
  while ((c = getopt_long(argc, argv, ":c:l:b:j:fqh", longopts, nullptr)) != -1) {
    std::string arg = optarg ? optarg : "";
    switch (c) {
      case 'c': {
        auto id = codec_from_name(arg);
        if (!id || !codec_can_write(*id))
          throw UsageError("unknown compressor '" + arg + "' (gzip, xz, lzo, lz4, zstd)");
        opt.data.codec.id = *id;
        compressor_given = true;
        break;
      }
      case 'l': {
        auto v = parse_int(arg);
        // Out of int's range is out of every codec's: never wrapped into one (2^32 + 9 is not 9).
        if (!v || *v < 0 || *v > INT_MAX) throw UsageError("invalid level '" + arg + "'");
        opt.data.codec.level = int(*v);
        level_given = true;
        break;
      }
      case 'b':
        opt.data.codec.block_size = parse_block_size(arg);
        block_given = true;
        break;
      case 'j': opt.threads = parse_jobs_arg(arg); break;
      case 'f': opt.force = true; break;
      case 'q': quiet = true; break;
      case 'h': std::fputs(kHelp, stdout); return 0;
      case kExclude: opt.scan.excludes.add(arg); break;
      case kExcludeFrom:
        exclude_files.push_back(arg);  // read once the command line is known to be good
        break;
      case kOneFs: opt.scan.one_file_system = true; break;
      case kNoXattrs: opt.scan.xattrs = false; break;
      case kAllRoot:
        opt.metadata.uid = 0;
        opt.metadata.gid = 0;
        break;
      case kUid: opt.metadata.uid = parse_user_id(arg); break;
      case kGid: opt.metadata.gid = parse_group_id(arg); break;
      case kMtime: opt.metadata.mtime = parse_mtime(arg); break;
      case kSkipUnreadable: opt.scan.skip_unreadable = true; break;
      case kStrict: opt.data.strict = true; break;
      case kKeepAsDirectory: opt.scan.keep_as_directory = true; break;
      case kNoDedup: opt.data.dedup = false; break;
      case kVerifyDedup: opt.data.verify_dedup = true; break;
      case kReuse: opt.reuse = optarg; break;
      case kReuseStrict: opt.reuse_strict = true; break;
      case kNoManifest: opt.metadata.manifest = false; break;
      case kNoExport: opt.metadata.exportable = false; break;
      case kProgress: force_progress = true; break;
      case kJson: json = true; break;
      case kTar: opt.tar = parse_tar_archive(arg); break;
      case kTarMemory:
        opt.tar_memory = parse_tar_memory(arg);
        tar_memory_given = true;
        break;
      default: throw_getopt_error(c, argv, longopts);
    }
  }
  check_tar_companions(opt.tar, tar_memory_given, exclude_files);
  if (opt.reuse_strict && opt.reuse.empty()) throw UsageError("--reuse-strict applies only with --reuse OLD");
  if (!opt.tar.empty()) {
    check_tar_usage(
        opt.tar, argc - optind, "create",
        opt.scan.one_file_system || opt.scan.keep_as_directory || opt.scan.skip_unreadable || opt.data.strict);
  } else if (argc - optind < 2) {
    throw UsageError("need at least one SOURCE and the IMAGE");
  }
  for (int i = optind; i < argc - 1; ++i) opt.scan.sources.push_back(argv[i]);
  opt.image = argv[argc - 1];
  // An empty argument is almost always an unset shell variable: it names no file.
  if (opt.image.empty()) throw UsageError("empty IMAGE");
  for (const std::string& s : opt.scan.sources)
    if (s.empty()) throw UsageError("empty SOURCE");
  check_image_to_standard_output(opt.image, json);
  // Read only now: '--exclude-from -' beside '--tar -' must be refused before standard input
  // (the archive) is read as patterns.
  for (const std::string& f : exclude_files) add_excludes_from(opt.scan.excludes, f);
  if (!opt.reuse.empty())
    take_open_settings_from(opt.reuse, opt.data.codec, compressor_given, level_given, block_given);
  if (!level_given) opt.data.codec.level = preferred_level(opt.data.codec.id);
  if (level_given) {
    const auto [lo, hi] = level_range(opt.data.codec.id);
    if (opt.data.codec.level < lo || opt.data.codec.level > hi)
      throw UsageError("level " + std::to_string(opt.data.codec.level) + " is out of range for " +
                       codec_name(opt.data.codec.id) + " (" + std::to_string(lo) + "-" + std::to_string(hi) + ")");
  }
  if (opt.data.codec.id == CodecId::lz4) opt.data.codec.lz4_hc = opt.data.codec.level > 0;
  opt.metadata.source_date = source_date_epoch();
  opt.warn = [](const std::string& w) { print_message("sqar create: warning: " + w); };
  opt.note = [](const std::string& w) { print_message("sqar create: note: " + w); };

  remove_temp_image_on_fatal_signals();

  // glibc gives each thread its own malloc arena and keeps what the scan and pipeline threads
  // freed there; two arenas cut peak RSS on the ports set by 2-8 MB (58 -> 53 MB at zstd-3)
  // at no measurable cost: the hot paths hardly allocate (slots and buffers are reused).
  // Set before the first thread starts, as glibc creates arenas lazily.
  mallopt(M_ARENA_MAX, 2);

  CreateProgress progress;
  CreateStats stats;
  {
    std::unique_ptr<StatusLine> bar;
    if (want_progress(quiet, force_progress))
      bar = std::make_unique<StatusLine>([&progress](double secs) { return create_status(progress, secs); });
    stats = create_image(opt, &progress);
  }
  if (opt.threads == 0) opt.threads = std::max(1u, std::thread::hardware_concurrency());
  if (json)
    print_json(opt, stats);
  else if (!quiet)
    print_summary(opt, stats);
  return 0;
}

int create_main(int argc, char** argv) {
  return run_guarded("create", [&] { return run_create(argc, argv); });
}

RegisterCommand reg("create", "pack directories into a SquashFS image", &create_main);

}  // namespace
}  // namespace sqar::cli
