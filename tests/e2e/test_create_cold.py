#!/usr/bin/env python3
"""`create` on a tree whose data is not in the page cache. Readers then start every read of a
batch before waiting for any (non-blocking reads, the rest fetched by the kernel meanwhile), a
path a freshly written tree never takes. The image must be byte-identical to the one built from
the cached tree, and unsquashfs must give back the source. Pages are dropped per file
(POSIX_FADV_DONTNEED), which disturbs nothing else on the machine; on a filesystem that keeps
them (a tmpfs) the test says so and is skipped. Runs under ThreadSanitizer in CI too."""
import os

from sqarfs_common import resident_pages
from sqartest import SQAR, compare_trees, log, main, make_full_tree, pseudo_random, run, skip, tempdir, unsquashfs_extract, write


def regular_files(root):
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) > 0:
                yield p


def evict(root):
    """Drops the data pages of every regular file below ROOT; returns how many stay resident.
    Each file is written back on its own (fsync) first, since dirty pages cannot be dropped:
    a global sync() would wait on every filesystem of the machine."""
    left = 0
    for p in regular_files(root):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        left += resident_pages(p)[0]
    return left


def test_create_from_a_cold_tree_matches_a_warm_build():
    # In the working directory (the build tree, on disk): /tmp may be a tmpfs.
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-cold-")) as d:
        for i in range(600):
            write(f"{d}/src/many/{i % 17}/f{i}", pseudo_random(i * 97 % 40000 + 1, i % 50))
        write(f"{d}/src/big/stream", pseudo_random(3 * 1024 * 1024 + 5, 7))  # several 1 MiB read units
        src = make_full_tree(f"{d}/src")
        env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
        run([SQAR, "create", "-q", "-j", "4", "-b", "16K", src, f"{d}/warm.sqfs"], env=env)
        left = evict(src)
        if left:
            skip(f"{left} pages of the source tree stay in the page cache after POSIX_FADV_DONTNEED "
                 f"(a tmpfs?): no cold reads to test")
        run([SQAR, "create", "-q", "-j", "4", "-b", "16K", src, f"{d}/cold.sqfs"], env=env)
        assert open(f"{d}/warm.sqfs", "rb").read() == open(f"{d}/cold.sqfs", "rb").read(), \
            "the image built from the cold tree differs from the one built from the cached tree"
        log("ok: cold and warm builds are byte-identical")
        unsquashfs_extract(f"{d}/cold.sqfs", f"{d}/out")
        compare_trees(src, f"{d}/out", "unsquashfs of the cold build")
        log("ok: unsquashfs gives back the source")


if __name__ == "__main__":
    main([test_create_from_a_cold_tree_matches_a_warm_build])
