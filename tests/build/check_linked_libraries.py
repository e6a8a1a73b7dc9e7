#!/usr/bin/env python3
"""With SQAR_STATIC_LIBS (the default), the binaries must need no shared library but the C
library: sqarfs is started at boot with a cold page cache, where each shared library cost a
cold disk read (~15 ms of a 25 ms mount, see docs/architecture.md "Cold start"). A dependency that
slips back in (a new -l, a libm call in reader code) shows up here.

usage: check_linked_libraries.py BINARY ALLOWED_SONAME...
"""
import subprocess
import sys


def needed(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
