// `sqar append` and `sqar merge`: images from images, their stored blocks copied as they are.
#include <getopt.h>

#include <climits>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "common/error.h"
#include "ops/merge_images.h"
#include "status_line.h"

namespace sqar::cli {
namespace {

const char kAppendHelp[] =
    "Usage: sqar append [OPTIONS] IMAGE SOURCE...\n"
    "       sqar append --tar ARCHIVE|- [OPTIONS] IMAGE\n"
    "\n"
    "Add SOURCEs (directories and files, read as 'sqar create' reads them: one directory's\n"
    "entries go into the root, several SOURCEs each under its own name), or the members of a tar\n"
    "archive, to IMAGE. IMAGE's data is\n"
    "copied as stored, never decompressed; new files whose content IMAGE holds are stored as\n"
    "duplicates of it. The sources IMAGE was made from need not exist any more. The new image\n"
    "is written beside IMAGE and renamed over it when complete, so mounts of the old one keep\n"
    "reading it, and an error or a signal leaves IMAGE as it was.\n"
    "\n"
    "  -r, --replace           a name IMAGE already has is replaced by the new entry (without it,\n"
    "                          that is an error; directories are merged either way); the old\n"
    "                          entry's data stays in IMAGE, unreferenced ('sqar merge IMAGE OUT'\n"
    "                          writes the image without it)\n"
    "  -c, --compressor NAME   must be IMAGE's (IMAGE's data is never recompressed)\n"
    "  -b, --block-size SIZE   must be IMAGE's\n"
    "  -l, --level N           compression level for the new data (default: IMAGE's)\n"
    "  -j, --threads N         worker threads (default, and 0: all cores)\n"
    "      --tar ARCHIVE       add a tar archive's members ('-': standard input) instead of\n"
    "                          SOURCEs, read once as 'sqar create --tar' reads them (any format\n"
    "                          and compression libarchive reads)\n"
    "      --tar-memory SIZE   with --tar: content kept in memory before the rest goes to an\n"
    "                          unlinked scratch file beside IMAGE (default 256M)\n"
    "      --exclude GLOB      leave out matching new entries (repeatable)\n"
    "      --exclude-from FILE read GLOBs from FILE, one a line ('#' starts a comment; '-':\n"
    "                          standard input)\n"
    "      --keep-as-directory store a single SOURCE directory under its own name\n"
    "      --one-file-system   do not descend into directories on other filesystems\n"
    "      --no-xattrs         do not store extended attributes of new entries\n"
    "      --all-root          make every new entry owned by root (same as --uid 0 --gid 0)\n"
    "      --uid N, --gid N    make every new entry owned by this user / group (id or name)\n"
    "      --mtime SECONDS     set every new entry's time to SECONDS since the epoch\n"
    "      --no-dedup          do not share data between new files and IMAGE's\n"
    "      --skip-unreadable   leave out unreadable files with a warning\n"
    "      --strict            a file that changes while it is read is an error\n"
    "      --json              summary as JSON on stdout\n"
    "  -q, --quiet             no progress bar and no summary\n"
    "      --progress          show the progress bar even when stderr is not a terminal\n"
    "  -h, --help              show this help\n"
    "\n"
    "Examples:\n"
    "  sqar append --keep-as-directory archive.sqfs /var/log/rotated/2026-11-25   # as 2026-11-25/\n"
    "  sqar append --replace archive.sqfs fixed/app.log.1\n"
    "  ssh host tar -C /var/log -cf - rotated | sqar append --tar - archive.sqfs\n"
    "\n"
    "Exit status: 0 when the image was written, 1 when it was not (IMAGE unchanged), 2 on bad usage.\n";

const char kMergeHelp[] =
    "Usage: sqar merge [OPTIONS] IMAGE... OUT\n"
    "\n"
    "Write OUT, an image whose root holds the union of the IMAGEs' roots (directories present in\n"
    "several are merged). Stored data blocks are copied as they are, never decompressed; a\n"
    "file whose content an earlier IMAGE holds is not copied again. OUT takes the first IMAGE's\n"
    "compressor and block size unless -c or -b choose others; an IMAGE stored another way is\n"
    "decoded and compressed again, with a warning. Shards packed on several machines are joined\n"
    "this way.\n"
    "\n"
    "  -r, --replace           a name in several IMAGEs: the last one wins (without it, an error)\n"
    "  -f, --force             overwrite OUT if it exists\n"
    "  -c, --compressor NAME   OUT's compressor: gzip, xz, lzo, lz4 or zstd (default: the first\n"
    "                          IMAGE's)\n"
    "  -b, --block-size SIZE   OUT's block size, a power of two from 4K to 1M (default: the first\n"
    "                          IMAGE's)\n"
    "  -l, --level N           level for recoded data (default: the first IMAGE's when OUT keeps\n"
    "                          its compressor, else create's default)\n"
    "  -j, --threads N         worker threads (default, and 0: all cores)\n"
    "      --no-dedup          copy every file's data, even content an earlier IMAGE holds\n"
    "      --json              summary as JSON on stdout\n"
    "  -q, --quiet             no progress bar and no summary\n"
    "      --progress          show the progress bar even when stderr is not a terminal\n"
    "  -h, --help              show this help\n"
    "\n"
    "Examples:\n"
    "  sqar merge shard-*.sqfs all.sqfs                 # union of the roots, duplicates stored once\n"
    "  sqar merge -c gzip -b 1M shard-*.sqfs all-gzip.sqfs   # stored another way: recoded\n"
    "  sqar merge shard-*.sqfs - | ssh host 'cat > all.sqfs'  # OUT '-': standard output\n"
    "\n"
    "OUT '-' writes the image to standard output; it is built in an unnamed file in $TMPDIR\n"
    "(default /tmp) and copied out once complete.\n"
    "Copied blocks are checked against each IMAGE's stored-data digests (or decoded, for images\n"
    "without them); recoded IMAGEs are decoded whole and checked against their manifest first. A\n"
    "damaged IMAGE is an error naming it and the bytes.\n"
    "Exit status: 0 when OUT was written, 1 when it was not, 2 on bad usage.\n";

// What the status line shows in each phase.
std::string merge_status(const ops::MergeProgress& p, double secs) {
  switch (p.phase.load()) {
    case ops::MergePhase::loading: return "reading the input images...";
    case ops::MergePhase::scanning: return "reading the new entries...";
    case ops::MergePhase::copying: return "copying: " + progress_bar(p.bytes_done.load(), p.bytes_total.load(), secs);
    case ops::MergePhase::data: return "new data: " + progress_bar(p.bytes_done.load(), p.bytes_total.load(), secs);
    case ops::MergePhase::finishing: break;
  }
  return "writing tables...";
}

void print_stats(const char* cmd, const ops::MergeOptions& opt, const ops::MergeStats& s, bool json) {
  const auto& d = s.data;
  const std::string out = opt.append ? opt.images[0] : opt.output == "-" ? "standard output" : opt.output;
  if (json) {
    std::printf(
        "{\"command\":\"%s\",\"image\":\"%s\",\"entries\":%llu,\"files\":%llu,\"copied_bytes\":%llu,"
        "\"shared_bytes\":%llu,\"checked_bytes\":%llu,\"decoded_bytes\":%llu,\"duplicate_files\":%llu,"
        "\"duplicate_bytes\":%llu,\"recoded_inputs\":%llu,\"recoded_files\":%llu,\"recoded_bytes\":%llu,"
        "\"new_bytes_in\":%llu,\"dedup_files\":%llu,\"dedup_bytes\":%llu,"
        "\"blocks_compressed\":%llu,\"blocks_stored_raw\":%llu,\"fragments\":%llu,\"image_bytes\":%llu,"
        "\"file_bytes\":%llu,\"seconds\":%.3f,\"load_seconds\":%.3f,\"copy_seconds\":%.3f,"
        "\"data_seconds\":%.3f,\"finish_seconds\":%.3f}\n",
        cmd, json_escape(out).c_str(), (unsigned long long)s.entries, (unsigned long long)s.files,
        (unsigned long long)s.copied_bytes, (unsigned long long)s.shared_bytes, (unsigned long long)s.checked_bytes,
        (unsigned long long)s.decoded_bytes, (unsigned long long)s.duplicate_files,
        (unsigned long long)s.duplicate_bytes, (unsigned long long)s.recoded_inputs,
        (unsigned long long)s.recoded_files, (unsigned long long)s.recoded_bytes,
        (unsigned long long)d.codec_input_bytes, (unsigned long long)d.dedup_files, (unsigned long long)d.dedup_bytes,
        (unsigned long long)d.blocks_compressed, (unsigned long long)(d.blocks_raw + d.blocks_incompressible),
        (unsigned long long)d.fragments, (unsigned long long)s.image_bytes, (unsigned long long)s.file_bytes, s.seconds,
        s.load_seconds, s.copy_seconds, s.data_seconds, s.finish_seconds);
    return;
  }
  std::fprintf(stderr, "%s: %s, %s; image %s\n", out.c_str(), counted(s.entries, "entry", "entries").c_str(),
               counted(s.files, "file", "files").c_str(), human_bytes(s.image_bytes).c_str());
  std::fprintf(stderr,
               "  copied %s of stored data (%s shared by copy_file_range), %s checked against digests, %s decoded\n",
               human_bytes(s.copied_bytes).c_str(), human_bytes(s.shared_bytes).c_str(),
               human_bytes(s.checked_bytes).c_str(), human_bytes(s.decoded_bytes).c_str());
  if (s.duplicate_files)
    std::fprintf(stderr, "  %s (%s) held by an earlier input, not copied\n",
                 counted(s.duplicate_files, "file", "files").c_str(), human_bytes(s.duplicate_bytes).c_str());
  if (s.recoded_inputs)
    std::fprintf(stderr,
                 "  recoded: %s (%s) of %s with another compressor or block size, decoded and compressed again\n",
                 counted(s.recoded_files, "file", "files").c_str(), human_bytes(s.recoded_bytes).c_str(),
                 counted(s.recoded_inputs, "input", "inputs").c_str());
  std::fprintf(stderr,
               "  new: %s given to the compressor, %s stored as duplicates; blocks: %llu stored compressed, %llu "
               "stored raw\n",
               human_bytes(d.codec_input_bytes).c_str(), counted(d.dedup_files, "file", "files").c_str(),
               (unsigned long long)d.blocks_compressed, (unsigned long long)(d.blocks_raw + d.blocks_incompressible));
  std::fprintf(stderr, "  time %.2f s (inputs read %.2f, copied %.2f, new data %.2f, tables and sync %.2f)\n",
               s.seconds, s.load_seconds, s.copy_seconds, s.data_seconds, s.finish_seconds);
}

int run(int argc, char** argv, bool append) {
  const char* cmd = append ? "append" : "merge";
  enum {
    kExclude = 256,
    kExcludeFrom,
    kOneFs,
    kNoXattrs,
    kNoDedup,
    kSkipUnreadable,
    kStrict,
    kKeepAsDirectory,
    kJson,
    kTar,
    kTarMemory,
    kAllRoot,
    kUid,
    kGid,
    kMtime,
    kProgress
  };
  static const option longopts[] = {{"replace", no_argument, nullptr, 'r'},
                                    {"force", no_argument, nullptr, 'f'},
                                    {"compressor", required_argument, nullptr, 'c'},
                                    {"level", required_argument, nullptr, 'l'},
                                    {"block-size", required_argument, nullptr, 'b'},
                                    {"threads", required_argument, nullptr, 'j'},
                                    {"quiet", no_argument, nullptr, 'q'},
                                    {"help", no_argument, nullptr, 'h'},
                                    {"exclude", required_argument, nullptr, kExclude},
                                    {"exclude-from", required_argument, nullptr, kExcludeFrom},
                                    {"one-file-system", no_argument, nullptr, kOneFs},
                                    {"no-xattrs", no_argument, nullptr, kNoXattrs},
                                    {"no-dedup", no_argument, nullptr, kNoDedup},
                                    {"skip-unreadable", no_argument, nullptr, kSkipUnreadable},
                                    {"strict", no_argument, nullptr, kStrict},
                                    {"keep-as-directory", no_argument, nullptr, kKeepAsDirectory},
                                    {"json", no_argument, nullptr, kJson},
                                    {"tar", required_argument, nullptr, kTar},
                                    {"tar-memory", required_argument, nullptr, kTarMemory},
                                    {"all-root", no_argument, nullptr, kAllRoot},
                                    {"uid", required_argument, nullptr, kUid},
                                    {"gid", required_argument, nullptr, kGid},
                                    {"mtime", required_argument, nullptr, kMtime},
                                    {"progress", no_argument, nullptr, kProgress},
                                    {nullptr, 0, nullptr, 0}};
  ops::MergeOptions opt;
  opt.append = append;
  bool quiet = false, json = false, force_progress = false;
  bool tar_memory_given = false;
  std::vector<std::string> exclude_files;
  optind = 1;
  opterr = 0;
  int c, longindex = -1;
  const char* optstring = append ? ":rc:l:b:j:qh" : ":rfc:l:b:j:qh";
  reject_foreign_options(argc, argv, optstring, longopts, kMksquashfsOptions, "mksquashfs");
  while ((c = getopt_long(argc, argv, optstring, longopts, &longindex)) != -1) {
    const std::string arg = optarg ? optarg : "";
    // Options of the other command are unknown here.
    const bool append_only = c == kExclude || c == kExcludeFrom || c == kOneFs || c == kNoXattrs ||
                             c == kSkipUnreadable || c == kStrict || c == kKeepAsDirectory || c == kTar ||
                             c == kTarMemory || c == kAllRoot || c == kUid || c == kGid || c == kMtime;
    if ((append_only && !append) || (c == 'f' && append)) {
      // Named as typed: argv[optind - 1] would be the option's value when it takes one.
      const std::string name = longindex >= 0 ? std::string("--") + longopts[longindex].name : std::string("-f");
      throw UsageError("option '" + name + "' is for 'sqar " + (append ? "merge" : "append") + "', not '" + cmd + "'");
    }
    longindex = -1;
    switch (c) {
      case 'r': opt.replace = true; break;
      case 'f': opt.force = true; break;
      case 'c': {
        auto id = codec_from_name(arg);
        if (!id || !codec_can_write(*id))
          throw UsageError("unknown compressor '" + arg + "' (gzip, xz, lzo, lz4, zstd)");
        opt.compressor = *id;
        break;
      }
      case 'l': {
        auto v = parse_int(arg);
        // Out of int's range is out of every codec's: never wrapped into one (2^32 + 9 is not 9).
        if (!v || *v < 0 || *v > INT_MAX) throw UsageError("invalid level '" + arg + "'");
        opt.level = int(*v);
        break;
      }
      case 'b': opt.block_size = parse_block_size(arg); break;
      case 'j': opt.threads = parse_jobs_arg(arg); break;
      case 'q': quiet = true; break;
      case 'h': std::fputs(append ? kAppendHelp : kMergeHelp, stdout); return 0;
      case kExclude: opt.excludes.add(arg); break;
      case kExcludeFrom:
        exclude_files.push_back(arg);  // read once the command line is known to be good
        break;
      case kOneFs: opt.one_file_system = true; break;
      case kNoXattrs: opt.xattrs = false; break;
      case kNoDedup: opt.dedup = false; break;
      case kSkipUnreadable: opt.skip_unreadable = true; break;
      case kStrict: opt.strict = true; break;
      case kKeepAsDirectory: opt.keep_as_directory = true; break;
      case kJson: json = true; break;
      case kProgress: force_progress = true; break;
      case kTar: opt.tar = parse_tar_archive(arg); break;
      case kTarMemory:
        opt.tar_memory = parse_tar_memory(arg);
        tar_memory_given = true;
        break;
      case kAllRoot: opt.uid = opt.gid = 0; break;
      case kUid: opt.uid = parse_user_id(arg); break;
      case kGid: opt.gid = parse_group_id(arg); break;
      case kMtime: opt.mtime = parse_mtime(arg); break;
      default: throw_getopt_error(c, argv, longopts);
    }
  }
  check_tar_companions(opt.tar, tar_memory_given, exclude_files);
  if (!opt.tar.empty()) {
    check_tar_usage(opt.tar, argc - optind, "append",
                    opt.one_file_system || opt.keep_as_directory || opt.skip_unreadable || opt.strict);
    opt.images.push_back(argv[optind]);
  } else if (argc - optind < 2) {
    throw UsageError(append ? "need IMAGE and at least one SOURCE" : "need at least one IMAGE and OUT");
  } else if (append) {
    opt.images.push_back(argv[optind]);
    for (int i = optind + 1; i < argc; ++i) opt.sources.push_back(argv[i]);
  } else {
    for (int i = optind; i < argc - 1; ++i) opt.images.push_back(argv[i]);
    opt.output = argv[argc - 1];
    check_image_to_standard_output(opt.output, json);
  }
  // An empty argument is almost always an unset shell variable; '-' names no image here.
  for (const std::string& a : opt.images) {
    if (a.empty()) throw UsageError("empty IMAGE");
    if (a == "-")
      throw UsageError(append ? "IMAGE cannot be '-': append reads the image file it names and replaces it"
                              : "an IMAGE cannot be '-' (standard input): merge reads its inputs in place; save "
                                "the stream to a file first");
  }
  for (const std::string& a : opt.sources)
    if (a.empty()) throw UsageError("empty SOURCE");
  if (!append && opt.output.empty()) throw UsageError("empty OUT");
  // Read only now: '--exclude-from -' beside '--tar -' must be refused before standard input
  // (the archive) is read as patterns.
  for (const std::string& f : exclude_files) add_excludes_from(opt.excludes, f);
  const std::string prefix = std::string("sqar ") + cmd + ": ";
  opt.image_time = source_date_epoch();
  opt.warn = [prefix](const std::string& w) { print_message(prefix + "warning: " + w); };
  opt.note = [prefix](const std::string& w) { print_message(prefix + "note: " + w); };
  remove_temp_image_on_fatal_signals();
  ops::MergeProgress progress;
  ops::MergeStats stats;
  {
    std::unique_ptr<StatusLine> bar;
    if (want_progress(quiet, force_progress))
      bar = std::make_unique<StatusLine>([&progress](double secs) { return merge_status(progress, secs); });
    stats = ops::merge_images(opt, &progress);
  }
  if (json || !quiet) print_stats(cmd, opt, stats, json);
  return 0;
}

int append_main(int argc, char** argv) {
  return run_guarded("append", [&] { return run(argc, argv, true); });
}
int merge_main(int argc, char** argv) {
  return run_guarded("merge", [&] { return run(argc, argv, false); });
}

RegisterCommand reg_append("append", "add files to an image without recompressing it", &append_main);
RegisterCommand reg_merge("merge", "join images into one without recompressing", &merge_main);

}  // namespace
}  // namespace sqar::cli
