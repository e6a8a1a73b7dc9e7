#!/usr/bin/env python3
"""16 threads read random ranges of large files through sqarfs and check every byte
against the source (with a cache smaller than the data, so blocks get evicted while in use)."""
import os
import random
import sys
import threading

from sqarfs_common import Mount, TempDir, mksquashfs, rand_bytes, require_fuse, sqar_create_works, run


def hammer(mnt, contents, threads=16, reads=300):
    errors = []

    def worker(seed):
        rng = random.Random(seed)
        fds = {n: os.open(f"{mnt}/{n}", os.O_RDONLY) for n in contents}
        try:
            for _ in range(reads):
                name = rng.choice(list(contents))
                data = contents[name]
                off = rng.randrange(len(data))
                size = rng.choice((1, 4096, 65536, 200000, rng.randrange(1, 300000)))
                got = os.pread(fds[name], size, off)
                if got != data[off:off + size]:
                    errors.append(f"{name} @{off}+{size}: wrong bytes")
                    return
        except OSError as e:
            errors.append(f"thread {seed}: {e}")
        finally:
            for fd in fds.values():
                os.close(fd)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors


def main():
    require_fuse()
    rng = random.Random(7)
    failures = []
    with TempDir() as tmp:
        src, mnt = f"{tmp}/src", f"{tmp}/mnt"
        os.makedirs(src)
        contents = {}
        for i in range(6):
            data = rand_bytes(rng, 1_500_000 + i * 12345, i % 2 == 0)
            contents[f"f{i}"] = data
            with open(f"{src}/f{i}", "wb") as f:
                f.write(data)
        images = []
        mksquashfs(src, f"{tmp}/zstd.sqfs", "-comp", "zstd")
        images.append(("mksquashfs zstd", f"{tmp}/zstd.sqfs"))
        sqar = sqar_create_works()
        if sqar:
            run([sqar, "create", src, f"{tmp}/sqar.sqfs"])
            images.append(("sqar create", f"{tmp}/sqar.sqfs"))
        else:
            print("NOTE: `sqar create` is not available yet; only mksquashfs images checked")
        for label, img in images:
            # Drop the page cache between runs by remounting; keep the block cache small.
            with Mount(img, mnt, "cache=1M,threads=16"):
                errs = hammer(mnt, contents)
            print(f"{label}: {'OK' if not errs else errs[:5]}")
            failures += errs
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
