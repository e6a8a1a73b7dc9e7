#!/usr/bin/env bash
# Formats the C and C++ sources with .clang-format, using Debian 12's clang-format 14 (newer
# versions lay some constructs out differently, so the version is pinned).
#
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   change nothing; list the files that differ and exit 1 if any do
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
command -v "$CLANG_FORMAT" >/dev/null || { echo "format: $CLANG_FORMAT not found (apt-get install clang-format-14)"; exit 2; }
mapfile -t files < <(git ls-files '*.c' '*.cpp' '*.h')
if [[ ${1:-} == --check ]]; then
  "$CLANG_FORMAT" --dry-run --Werror "${files[@]}" 2>&1 | grep -o '^[^:]*:[0-9]*' | sort -u | head -40 || true
  "$CLANG_FORMAT" --dry-run --Werror "${files[@]}" >/dev/null 2>&1 || { echo "format: files above differ from .clang-format; run scripts/format.sh"; exit 1; }
  echo "format: ${#files[@]} files match .clang-format"
else
  "$CLANG_FORMAT" -i "${files[@]}"
fi
