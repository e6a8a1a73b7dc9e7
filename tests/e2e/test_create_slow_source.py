#!/usr/bin/env python3
"""`create` from a source whose listing keeps the scan's listers waiting. A tree that is not in
the cache makes every directory open, getdents and stat wait for the disk, and the scan then
admits more listers than -j sets (Scanner::adapt_listers); on a cached tree it keeps to 2 per
thread. Dropping the inode and dentry caches in a test would disturb every other test on the
machine, so the slow source here is a fresh sqarfs mount of the tree's own image: every lookup,
readdir and getxattr is a round trip to the daemon. The image built from the mount must be
byte-identical to the one built from the tree (sqarfs presents the same metadata), and `--json`
must report that more listers worked than the 2 that -j1 starts with (on one of up to three
fresh mounts: that part is timing). Runs under ThreadSanitizer in CI too."""
import json
import os

from sqarfs_common import Mount, require_fuse
from sqartest import SQAR, log, main, make_full_tree, pseudo_random, run, tempdir, write


def test_listers_grow_on_a_slow_source_and_the_image_is_the_same():
    require_fuse()
    with tempdir() as d:
        # Many small directories: batches of listings whose every step is a round trip.
        for i in range(1200):
            write(f"{d}/src/tree/{i % 40}/{i % 7}/f{i}", pseudo_random(i * 31 % 3000 + 1, i % 20))
        src = make_full_tree(f"{d}/src")
        env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
        cmd = [SQAR, "create", "--json", "-j", "1", "-b", "16K"]
        direct = json.loads(run(cmd + [src, f"{d}/direct.sqfs"], env=env).stdout)
        expected = open(f"{d}/direct.sqfs", "rb").read()
        # Whether a batch of listings slept once per directory is timing, so a busy machine may
        # hide it once; each try is a fresh mount, and every try's image must be the same.
        for attempt in range(1, 4):
            with Mount(f"{d}/direct.sqfs", f"{d}/mnt{attempt}"):
                mounted = json.loads(run(cmd + [f"{d}/mnt{attempt}", f"{d}/mounted.sqfs", "--force"], env=env).stdout)
            log(f"try {attempt}: listers: {direct['scan_listers']} from the tree ({direct['scan_seconds']:.3f} s), "
                f"{mounted['scan_listers']} from the fresh mount ({mounted['scan_seconds']:.3f} s)")
            got = open(f"{d}/mounted.sqfs", "rb").read()
            if got != expected:
                first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
                raise AssertionError(f"the image built through the sqarfs mount differs from the one built from the "
                                     f"tree: {len(got)} vs {len(expected)} bytes, first difference at byte {first}")
            if mounted["scan_listers"] > 2:
                break
        log("ok: the image built through the mount is byte-identical")
        assert mounted["scan_listers"] > 2, \
            f"the scan kept to {mounted['scan_listers']} listers on a source where every listing waits (3 tries)"
        log("ok: the scan added listers while listing waited")

if __name__ == "__main__":
    main([test_listers_grow_on_a_slow_source_and_the_image_is_the_same])
