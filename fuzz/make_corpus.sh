#!/usr/bin/env bash
# Generates the seed corpus for the fuzz harnesses into OUTDIR/<harness>/ (default build-fuzz/seeds):
# small real images made by mksquashfs (every compressor, and one with every table stored
# uncompressed so mutations land directly in inodes, directories and fragment entries) and by
# `sqar create` (xattrs, symlinks, hard links, fragments, a directory with an index, manifest),
# single compressed metadata blocks of every codec, and manifest trailers.
# Seeds are generated at CI time so no binaries need to be committed.
#
# Usage: fuzz/make_corpus.sh [OUTDIR]   (SQAR=path/to/sqar for the sqar-made seeds)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build-fuzz/seeds}
SQAR=${SQAR:-build/tools/sqar}
rm -rf "$OUT"
mkdir -p "$OUT"/{fuzz_image,fuzz_codec,fuzz_manifest}
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
ln "$src/small.txt" "$src/dir/hard"
ln -s small.txt "$src/link"
ln -s "/a/much/longer/absolute/target/$(printf 'p%.0s' {1..60})" "$src/dir/long-link"
mkfifo "$src/fifo"
setfattr -n user.note -v hello "$src/small.txt" 2>/dev/null || true
setfattr -n user.dir -v "$(printf 'v%.0s' {1..300})" "$src/dir" 2>/dev/null || true
setfattr -n trusted.t -v x "$src/dir/t1" 2>/dev/null || true
# Enough entries for the directory to span metadata blocks and get a directory index.
for i in $(seq 1 400); do : >"$src/big-dir/entry-with-a-long-name-$i"; done
find "$src" -exec touch -h -d @1600000000 {} +

n=0
seed() { cp "$1" "$OUT/$2/$(printf '%02d' $n)-$(basename "$1")"; n=$((n + 1)); }

if command -v mksquashfs >/dev/null; then
  for comp in gzip xz lzo lz4 zstd; do
    mksquashfs "$src" "$work/mk-$comp.sqfs" -comp "$comp" -b 4096 -noappend -quiet -no-progress >/dev/null 2>&1 ||
      continue
    seed "$work/mk-$comp.sqfs" fuzz_image
  done
  mksquashfs "$src" "$work/mk-raw.sqfs" -b 4096 -noI -noD -noF -noX -noappend -quiet -no-progress >/dev/null
  seed "$work/mk-raw.sqfs" fuzz_image
  mksquashfs "$src" "$work/mk-nofrag.sqfs" -b 4096 -no-fragments -no-exports -noappend -quiet -no-progress >/dev/null
  seed "$work/mk-nofrag.sqfs" fuzz_image
fi
if [[ -x $SQAR ]]; then
  for comp in gzip xz lzo lz4 zstd; do
    "$SQAR" create -q -c "$comp" -b 4K "$src" "$work/sqar-$comp.sqfs"
    seed "$work/sqar-$comp.sqfs" fuzz_image
  done
else
  echo "note: $SQAR not built: no sqar-made seeds" >&2
fi

# Codec seeds: the first metadata block of every image (the fuzz_codec harness takes a selector
# byte: low 3 bits pick the codec by index gzip,lzma,lzo,xz,lz4,zstd; 0x00 = 8 KiB output), and a
# manifest trailer with both selector values (fix checksums or not).
python3 - "$work" "$OUT" <<'PY'
import glob, lzma, os, struct, sys
work, out = sys.argv[1], sys.argv[2]
index = {"gzip": 0, "lzma": 1, "lzo": 2, "xz": 3, "lz4": 4, "zstd": 5}
for img in sorted(glob.glob(f"{work}/*.sqfs")):
    data = open(img, "rb").read()
    comp = struct.unpack_from("<H", data, 20)[0]
    name = {1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd"}[comp]
    inode_start, = struct.unpack_from("<Q", data, 64)
    bytes_used, = struct.unpack_from("<Q", data, 40)
    hdr, = struct.unpack_from("<H", data, inode_start)
    if not hdr & 0x8000:  # compressed metadata block
        block = data[inode_start + 2:inode_start + 2 + (hdr & 0x7FFF)]
        base = os.path.basename(img)
        open(f"{out}/fuzz_codec/{base}-{name}", "wb").write(bytes([index[name]]) + block)
    trailer = (bytes_used + 4095) // 4096 * 4096
    if data[trailer:trailer + 8] == b"SQARMNF1":
        version, field, count = struct.unpack_from("<IIQ", data, trailer + 8)
        payload = {1: 20 * count, 2: (field + 7) // 8 + 16 * count}.get(version, 20 * count + 16 * field)
        t = data[trailer:trailer + 40 + payload]
        for sel in (0, 1):
            open(f"{out}/fuzz_manifest/{os.path.basename(img)}-{sel}", "wb").write(bytes([sel]) + t)
# lzma (read-only codec): an lzma-alone stream, like old SquashFS images.
raw = b"".join(b"lzma seed %d\n" % i for i in range(300))
open(f"{out}/fuzz_codec/lzma-alone", "wb").write(bytes([index["lzma"]]) + lzma.compress(raw, format=lzma.FORMAT_ALONE))
PY
du -sh "$OUT"/* | sed 's/^/seeds: /'
