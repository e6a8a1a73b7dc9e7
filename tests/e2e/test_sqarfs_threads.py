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
        failures += file_with_a_huge_block_list(tmp)
    return 1 if failures else 0


def file_with_a_huge_block_list(tmp):
    """A file whose block list is too large for the per-file node cache (360 MiB at 4 KiB
    blocks: 92k blocks) is kept aside and reused; random reads from 8 threads must still
    return its bytes: holes as zeros, and the data islands."""
    src, mnt = f"{tmp}/big-src", f"{tmp}/big-mnt"
    os.makedirs(src)
    rng = random.Random(11)
    size = 360 << 20
    islands = {}
    with open(f"{src}/big", "wb") as f:
        for i in range(40):
            off = rng.randrange(0, size - 70000)
            data = rand_bytes(rng, rng.randrange(1, 65536), i % 2 == 0)
            f.seek(off)
            f.write(data)
            islands[off] = data
        f.truncate(size)
    spans = {}  # the truth: islands as written, later ones over earlier ones
    with open(f"{src}/big", "rb") as f:
        for off, data in islands.items():
            f.seek(off)
            spans[off] = f.read(len(data))

    def expected(off, n):
        out = bytearray(n)
        for start, data in spans.items():
            lo, hi = max(off, start), min(off + n, start + len(data))
            if lo < hi:
                out[lo - off:hi - off] = data[lo - start:hi - start]
        return bytes(out)

    img = f"{tmp}/big.sqfs"
    mksquashfs(src, img, "-b", "4096", "-comp", "gzip")
    errors = []

    def worker(seed):
        r = random.Random(seed)
        fd = os.open(f"{mnt}/big", os.O_RDONLY)
        try:
            for k in range(200):
                # Half the reads inside islands, half anywhere.
                start = r.choice(list(spans)) if k % 2 else r.randrange(size)
                off = min(size - 1, start + r.randrange(0, 5000))
                n = r.choice((1, 4096, 10000))
                if os.pread(fd, n, off) != expected(off, min(n, size - off)):
                    errors.append(f"big @{off}+{n}: wrong bytes")
                    return
        finally:
            os.close(fd)

    with Mount(img, mnt, "threads=8"):
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    print(f"360 MiB file at 4 KiB blocks: {'OK' if not errors else errors[:5]}")
    return errors


if __name__ == "__main__":
    sys.exit(main())
