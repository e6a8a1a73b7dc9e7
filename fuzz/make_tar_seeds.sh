#!/usr/bin/env bash
# Seeds for fuzz_tar: archives of a tiny tree (hard links, symlinks, a fifo, a sparse file,
# with two data regions, xattrs, a duplicate, a long name) by GNU tar (pax, gnu, ustar) and bsdtar (pax), plain and
# gzip/zstd/xz-compressed, each behind the harness's option byte. Called by make_corpus.sh.
# Usage: fuzz/make_tar_seeds.sh OUTDIR
set -euo pipefail
out=$1
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src/d/e" "$src/x"
printf 'hello tar\n' >"$src/a.txt"
printf 'hello tar\n' >"$src/d/same.txt"
printf 'object' >"$src/x/y.o"
ln "$src/a.txt" "$src/d/e/hard"
ln -s ../a.txt "$src/d/link"
mkfifo "$src/fifo"
# Two data regions between holes, so the content store's multi-extent reads are reached.
truncate -s 20000 "$src/sparse"
printf 'z' | dd of="$src/sparse" bs=1 seek=5000 conv=notrunc status=none
printf 'y' | dd of="$src/sparse" bs=1 seek=15000 conv=notrunc status=none
printf 'long' >"$src/d/$(printf 'n%.0s' {1..120})"
setfattr -n user.seed -v value "$src/a.txt" 2>/dev/null || true
touch -d @1600000000 "$src"/* "$src"/d/*
n=0
seed() {  # seed FILE: one copy per option byte 0 and 5 (spill all + excludes)
  for sel in 0 5; do
    { printf "\\x0$sel"; cat "$1"; } >"$out/$(basename "$1")-$sel"
  done
}
for fmt in posix gnu; do
  tar -b 1 --format=$fmt --sparse --xattrs -C "$src" -cf "$work/gnu-$fmt.tar" . && seed "$work/gnu-$fmt.tar"
done
tar -b 1 --format=ustar -C "$src" -cf "$work/gnu-ustar.tar" a.txt d/same.txt d/link fifo && seed "$work/gnu-ustar.tar"
bsdtar -b 1 --format pax -C "$src" -cf "$work/bsd-pax.tar" . && seed "$work/bsd-pax.tar"
gzip -9 -c "$work/gnu-posix.tar" >"$work/gnu-posix.tar.gz" && seed "$work/gnu-posix.tar.gz"
zstd -q -19 -c "$work/gnu-posix.tar" >"$work/gnu-posix.tar.zst" && seed "$work/gnu-posix.tar.zst"
xz -c "$work/gnu-gnu.tar" >"$work/gnu-gnu.tar.xz" && seed "$work/gnu-gnu.tar.xz"
