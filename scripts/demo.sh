#!/usr/bin/env bash
# README command 1: installs what is missing, builds, then runs the tour (scripts/demo-tour.sh):
# packs a sample tree, mounts it with sqarfs, shows it, unmounts, prints the image's stats and
# rebuilds it with --reuse. Pass a directory to pack that instead.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
bash scripts/install-deps.sh
bash scripts/build.sh >/dev/null
SQAR="$ROOT/build/tools/sqar" SQARFS="$ROOT/build/fuse/sqarfs" exec bash scripts/demo-tour.sh "$@"
