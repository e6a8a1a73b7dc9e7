#!/usr/bin/env bash
# Regenerates the committed seed corpus fuzz/corpus/<harness>/. Run it by hand after a format
# change and commit the result; fuzz/run.sh and the replay tests use the committed files, so CI
# fuzzing starts from the same seeds every run and needs none of the tools below.
#
# - fuzz_image, fuzz_sqarfs: small images of one tiny tree (every kind of entry: xattrs,
#   hard links, symlinks, sparse files, devices, fifos, fragments shared by dedup, a
#   directory large enough for a directory index) made by mksquashfs, gensquashfs and
#   `sqar create` for every codec each supports (gensquashfs in Debian lacks lzo), plus one
#   mksquashfs image with every table uncompressed so mutations land in inodes, directory
#   entries and fragment entries directly.
# - fuzz_codec: the first metadata block of each image, behind the harness's selector byte,
#   an lzma-alone stream, and two xz blocks the kernel refuses (CRC64, a 1 MiB dictionary).
# - fuzz_manifest: the manifest trailers of the sqar images, with both selector values.
# - fuzz_tar: small tar archives (fuzz/make_tar_seeds.sh).
# Block size 4 KiB keeps each image around 10-20 KB while still giving files several blocks.
#
# Usage: fuzz/make_corpus.sh [OUTDIR]   (default fuzz/corpus; SQAR=path/to/sqar, default build/tools/sqar)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-fuzz/corpus}
SQAR=${SQAR:-build/tools/sqar}
for tool in mksquashfs gensquashfs setfattr "$SQAR"; do
  command -v "$tool" >/dev/null || { echo "make_corpus: $tool not found" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT"/{fuzz_image,fuzz_sqarfs,fuzz_codec,fuzz_manifest}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A tiny tree with one of every kind of entry the reader decodes.
src=$work/src
mkdir -p "$src/dir/sub" "$src/empty-dir" "$src/big-dir"
printf 'hello fuzzer\n' >"$src/small.txt"
head -c 9000 /dev/zero | tr '\0' 'a' >"$src/two-blocks.txt"      # 2 blocks of 4K + a tail
printf 'tail one' >"$src/dir/t1"
printf 'tail one' >"$src/dir/sub/t1-dup"                         # dedup: same fragment
python3 -c "import random,sys; sys.stdout.buffer.write(random.Random(1).randbytes(5000))" >"$src/dir/random.bin"  # stored raw
truncate -s 20000 "$src/sparse"; printf 'x' | dd of="$src/sparse" bs=1 seek=10000 conv=notrunc status=none
truncate -s 65536 "$src/dir/holes"; printf 'y' | dd of="$src/dir/holes" bs=1 seek=40000 conv=notrunc status=none
ln "$src/small.txt" "$src/dir/hard"
ln "$src/dir/holes" "$src/holes-hard"
ln -s small.txt "$src/link"
ln -s "/a/much/longer/absolute/target/$(printf 'p%.0s' {1..60})" "$src/dir/long-link"
mkfifo "$src/fifo"
# Devices need root; without it the images simply have none.
mknod "$src/dir/null" c 1 3 2>/dev/null || echo "make_corpus: not root: no device nodes" >&2
mknod "$src/dir/loop" b 7 0 2>/dev/null || true
setfattr -n user.note -v hello "$src/small.txt"
setfattr -n user.dir -v "$(printf 'v%.0s' {1..300})" "$src/dir"
setfattr -n user.big -v "$(printf 'w%.0s' {1..200})" "$src/dir/random.bin"
setfattr -n user.big -v "$(printf 'w%.0s' {1..200})" "$src/two-blocks.txt"   # a shared out-of-line value
setfattr -n trusted.t -v x "$src/dir/t1"
# Enough entries for the directory to span metadata blocks and get a directory index.
for i in $(seq 1 400); do : >"$src/big-dir/entry-with-a-long-name-$i"; done
find "$src" -exec touch -h -d @1600000000 {} +

seed() { cp "$work/$1" "$OUT/fuzz_image/$1"; cp "$work/$1" "$OUT/fuzz_sqarfs/$1"; }
mk() { mksquashfs "$src" "$work/$1" -b 4096 -noappend -quiet -no-progress "${@:2}" >/dev/null; seed "$1"; }

for comp in gzip xz lzo lz4 zstd; do
  mk "mk-$comp.sqfs" -comp "$comp"
  "$SQAR" create -q -c "$comp" -b 4K "$src" "$work/sqar-$comp.sqfs"
  seed "sqar-$comp.sqfs"
  if [[ $comp != lzo ]]; then
    gensquashfs -q -f -x -k -e -c "$comp" -b 4096 -D "$src" "$work/gen-$comp.sqfs" >/dev/null
    seed "gen-$comp.sqfs"
  fi
done
mk mk-raw.sqfs -noI -noD -noF -noX
mk mk-nofrag-noexport.sqfs -no-fragments -no-exports -no-xattrs
"$SQAR" create -q --no-manifest -b 4K "$src" "$work/sqar-nomanifest.sqfs"
seed sqar-nomanifest.sqfs

python3 - "$work" "$OUT" <<'PY'
import glob, lzma, os, struct, sys
work, out = sys.argv[1], sys.argv[2]
# fuzz_codec's selector byte: low 3 bits pick the codec by this index; top bits 0 = 8 KiB output.
index = {"gzip": 0, "lzma": 1, "lzo": 2, "xz": 3, "lz4": 4, "zstd": 5}
names = {1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd"}
for img in sorted(glob.glob(f"{work}/*.sqfs")):
    data = open(img, "rb").read()
    base = os.path.basename(img)
    name = names[struct.unpack_from("<H", data, 20)[0]]
    bytes_used, = struct.unpack_from("<Q", data, 40)
    inode_start, = struct.unpack_from("<Q", data, 64)
    hdr, = struct.unpack_from("<H", data, inode_start)
    if not hdr & 0x8000:  # a compressed metadata block
        block = data[inode_start + 2:inode_start + 2 + (hdr & 0x7FFF)]
        open(f"{out}/fuzz_codec/{base}-{name}", "wb").write(bytes([index[name]]) + block)
    # The manifest trailer (docs/format.md): at align_up(bytes_used, 4096).
    trailer = (bytes_used + 4095) // 4096 * 4096
    if data[trailer:trailer + 8] == b"SQARMNF1":
        version, field, count = struct.unpack_from("<IIQ", data, trailer + 8)
        payload = {1: 20 * count, 2: (field + 7) // 8 + 16 * count}.get(version, 20 * count + 16 * field)
        t = data[trailer:trailer + 40 + payload]
        for sel in (0, 1):  # bit 0: the harness recomputes the checksums
            open(f"{out}/fuzz_manifest/{base}-{sel}", "wb").write(bytes([sel]) + t)
# lzma (read-only codec): an lzma-alone stream, as old SquashFS images hold.
raw = b"".join(b"lzma seed %d\n" % i for i in range(300))
open(f"{out}/fuzz_codec/lzma-alone", "wb").write(bytes([index["lzma"]]) + lzma.compress(raw, format=lzma.FORMAT_ALONE))
# xz blocks the kernel refuses (verify's check): a CRC64 check, and a 1 MiB dictionary.
lines = b"".join(b"line %d of a log\n" % i for i in range(400))
for name, check, dictionary in (("xz-crc64", lzma.CHECK_CRC64, 1 << 16), ("xz-dict-1m", lzma.CHECK_CRC32, 1 << 20)):
    block = lzma.compress(lines, format=lzma.FORMAT_XZ, check=check,
                          filters=[{"id": lzma.FILTER_LZMA2, "dict_size": dictionary}])
    open(f"{out}/fuzz_codec/{name}", "wb").write(bytes([index["xz"]]) + block)
PY
fuzz/make_tar_seeds.sh "$OUT/fuzz_tar"
du -sh "$OUT"/* | sed 's/^/seeds: /'
