#!/usr/bin/env python3
"""16 threads read random ranges of large files through sqarfs and check every byte
against the source (with a cache smaller than the data, so blocks get evicted while in use).
Each reader's result comes back through a future: an exception (EIO) or a short read in any
thread fails the test."""
import concurrent.futures
import os
import random
import sys

from sqarfs_common import Mount, fuse_workspace, rand_bytes, sqar_create_works
from sqartest import exit_status, mksquashfs, run


def run_readers(worker, threads):
    """Runs worker(seed) on `threads` threads at once. Each returns the list of its wrong
    answers; an exception in any (an EIO, a short read) is returned as a failure too, never
    lost with its thread."""
    errors = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        futures = {pool.submit(worker, seed): seed for seed in range(threads)}
        for f in concurrent.futures.as_completed(futures):
            try:
                errors += f.result()
            except Exception as e:  # noqa: BLE001 - every reader's failure is the test's
                errors.append(f"reader {futures[f]}: {type(e).__name__}: {e}")
    return errors


def pread_exactly(fd, size, off, file_size, what):
    """pread that fails on a short answer: sqarfs must return every byte up to the end."""
    got = os.pread(fd, size, off)
    want = max(0, min(size, file_size - off))
    if len(got) != want:
        raise AssertionError(f"{what} @{off}+{size}: short read, {len(got)} of {want} bytes")
    return got


def hammer(mnt, contents, threads=16, reads=300):
    def worker(seed):
        rng = random.Random(seed)
        fds = {n: os.open(f"{mnt}/{n}", os.O_RDONLY) for n in contents}
        try:
            for _ in range(reads):
                name = rng.choice(list(contents))
                data = contents[name]
                off = rng.randrange(len(data))
                size = rng.choice((1, 4096, 65536, 200000, rng.randrange(1, 300000)))
                if pread_exactly(fds[name], size, off, len(data), name) != data[off:off + size]:
                    return [f"{name} @{off}+{size}: wrong bytes"]
        finally:
            for fd in fds.values():
                os.close(fd)
        return []

    return run_readers(worker, threads)


def main():
    rng = random.Random(7)
    failures = []
    with fuse_workspace() as (tmp, src, mnt):
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
        run([sqar_create_works(), "create", src, f"{tmp}/sqar.sqfs"])
        images.append(("sqar create", f"{tmp}/sqar.sqfs"))
        for label, img in images:
            # Drop the page cache between runs by remounting; keep the block cache small.
            with Mount(img, mnt, "cache=1M,threads=16"):
                errs = hammer(mnt, contents)
            print(f"{label}: {'OK' if not errs else errs[:5]}")
            failures += errs
        failures += file_with_a_huge_block_list(tmp)
    return exit_status(failures)


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

    def worker(seed):
        r = random.Random(seed)
        fd = os.open(f"{mnt}/big", os.O_RDONLY)
        try:
            for k in range(200):
                # Half the reads inside islands, half anywhere.
                start = r.choice(list(spans)) if k % 2 else r.randrange(size)
                off = min(size - 1, start + r.randrange(0, 5000))
                n = r.choice((1, 4096, 10000))
                if pread_exactly(fd, n, off, size, "big") != expected(off, min(n, size - off)):
                    return [f"big @{off}+{n}: wrong bytes"]
        finally:
            os.close(fd)
        return []

    with Mount(img, mnt, "threads=8"):
        errors = run_readers(worker, 8)
    print(f"360 MiB file at 4 KiB blocks: {'OK' if not errors else errors[:5]}")
    return errors


if __name__ == "__main__":
    sys.exit(main())
