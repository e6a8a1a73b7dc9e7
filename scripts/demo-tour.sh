#!/usr/bin/env bash
# The demo's tour, run by scripts/demo.sh after set-up and by tests/e2e/test_demo.py with the
# binaries under test: SQAR and SQARFS name them. Packs a sample tree (or the directory given),
# mounts it with sqarfs, compares the mount with the source, unmounts, prints the image's stats
# and rebuilds it with --reuse.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SQAR:?SQAR must name the sqar binary}" "${SQARFS:?SQARFS must name the sqarfs binary}"

WORK=$(mktemp -d /tmp/sqar-demo.XXXXXX)
MNT="$WORK/mnt"
cleanup() {
  mountpoint -q "$MNT" 2>/dev/null && { fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT"; }
  rm -rf "$WORK"
}
trap cleanup EXIT

SRC=${1:-}
if [[ "$SRC" == -h || "$SRC" == --help ]]; then
  echo "usage: scripts/demo.sh [DIR]   (packs DIR, or a generated sample tree, mounts it, rebuilds it)"
  exit 0
fi
if [[ -z "$SRC" ]]; then
  SRC="$WORK/sample"
  echo "== generating the sample tree (logs + rotated copy, two source releases, duplicated media, a dump)"
  python3 scripts/make_sample_tree.py "$SRC"
fi
echo
echo "== sqar create $SRC $WORK/sample.sqfs"
"$SQAR" create --progress "$SRC" "$WORK/sample.sqfs"

echo
echo "== sqarfs $WORK/sample.sqfs $MNT"
mkdir -p "$MNT"
start=$(date +%s%N)
"$SQARFS" "$WORK/sample.sqfs" "$MNT"
echo "mounted in $(( ($(date +%s%N) - start) / 1000000 )) ms"
echo
ls -la "$MNT"
echo
echo "== a few entries"
(cd "$MNT" && find . -maxdepth 3 | sort | head -25)
if [[ -f "$MNT/logs/app.log" ]]; then
  echo
  echo "== head -n 3 logs/app.log (read through the mount)"
  head -n 3 "$MNT/logs/app.log"
fi
echo
echo "== comparing the mount with the source"
if diff -r --no-dereference "$SRC" "$MNT" >/dev/null; then echo "identical: every file and link matches"; else echo "DIFFERENT"; exit 1; fi

fusermount3 -u "$MNT"
echo "unmounted"
echo
echo "== sqar info"
"$SQAR" info "$WORK/sample.sqfs"
echo
echo "== sqar verify"
"$SQAR" verify "$WORK/sample.sqfs"
echo
echo "== the next night's rebuild: sqar create --reuse (blocks the old image holds are copied"
echo "   from it after a check against the source, not compressed again)"
"$SQAR" create --reuse "$WORK/sample.sqfs" "$SRC" "$WORK/rebuilt.sqfs" 2>&1 | grep -E "blocks:|reused:|time"
