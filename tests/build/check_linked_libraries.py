#!/usr/bin/env python3
"""With SQAR_STATIC_LIBS (the default), the binaries must need no shared library but the C
library: sqarfs is started at boot with a cold page cache, where each shared library cost a
cold disk read (~15 ms of a 25 ms mount, see docs/architecture.md "Cold start"). A dependency that
slips back in (a new -l, a libm call in reader code) shows up here.

Nor may the binary export a statically linked codec's symbols: the shared libarchive that
`sqar` needs would then call them instead of its own shared libraries (Debian's libzstd.a
has no worker threads, which made extract --tar x.tar.zst compress on one core).

usage: check_linked_libraries.py BINARY ALLOWED_SONAME...
"""
import subprocess
import sys


def needed(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


CODEC_PREFIXES = ("ZSTD_", "ZDICT_", "lzma_", "LZ4_", "LZ4F_", "deflate", "inflate", "libdeflate_", "XXH", "BZ2_",
                  "lzo1", "sqfs_")


def exported_codec_symbols(binary):
    """Symbols the binary defines in its dynamic symbol table that belong to a codec library."""
    out = subprocess.run(["nm", "-D", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(CODEC_PREFIXES))


def main():
    binary, allowed = sys.argv[1], set(sys.argv[2:])
    libs = needed(binary)
    # The dynamic loader is loaded for every dynamic binary anyway (part of the C library).
    extra = [lib for lib in libs if lib not in allowed and not lib.startswith("ld-linux")]
    print(f"{binary}: needs {', '.join(libs) or 'nothing'}")
    if not libs:
        print("FAIL: no NEEDED entries at all: is this a dynamic binary?")
        return 1
    if extra:
        print(f"FAIL: shared libraries beyond {sorted(allowed)}: {extra}")
        return 1
    exported = exported_codec_symbols(binary)
    if exported:
        print(f"FAIL: {len(exported)} codec symbols exported (shared libraries would bind to them): {exported[:8]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
