#!/usr/bin/env python3
"""`create` of very deep trees (400 and 1000 levels) under a limit of 1024 open descriptors,
with two threads (so several directory listers and readers walk the tree at once). The hard
limit is 1024 as well, so raising the soft limit to the hard one (which sqar does at start)
cannot be what makes it pass: the scan and the readers must not hold a descriptor per level.
A second run keeps the soft limit at 1024 under a higher hard limit. The image is checked
with unsquashfs: every directory and file, with its content."""
import os
import resource

from sqartest import SQAR, log, main, run, tempdir, unsquashfs_extract


def build(root, depth):
    """root/d/d/.../d, `depth` levels, a file at every level and a longer one at the bottom.
    Built through descriptors: no path gets long."""
    os.makedirs(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(depth):
            f = os.open(f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(f, f"level {i}\n".encode() * (1 + i % 5))
            os.close(f)
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        f = os.open("bottom", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(f, b"the bottom\n" * 1000)
        os.close(f)
    finally:
        os.close(fd)


def check(out, depth):
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(depth):
            assert sorted(os.listdir(fd)) == ["d", f"f{i}"], f"level {i}: {sorted(os.listdir(fd))}"
            f = os.open(f"f{i}", os.O_RDONLY, dir_fd=fd)
            assert os.read(f, 1 << 16) == f"level {i}\n".encode() * (1 + i % 5), f"level {i}: wrong content"
            os.close(f)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        f = os.open("bottom", os.O_RDONLY, dir_fd=fd)
        assert os.read(f, 1 << 16) == b"the bottom\n" * 1000, "the bottom file differs"
        os.close(f)
    finally:
        os.close(fd)


def limited(soft, hard):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def pack_under_limit(depth):
    with tempdir() as d:
        try:
            pack_tree(d, depth)
        finally:
            run(["rm", "-rf", d])  # shutil.rmtree recurses once per level: too deep for Python


def pack_tree(d, depth):
    build(f"{d}/src", depth)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limits = [(1024, 1024)]
    if hard == resource.RLIM_INFINITY or hard > 1024:
        limits.append((1024, 1 << 16 if hard == resource.RLIM_INFINITY else min(hard, 1 << 16)))
    for soft, hard_limit in limits:
        img = f"{d}/img-{hard_limit}.sqfs"
        p = run([SQAR, "create", "-q", "-j", "2", f"{d}/src", img], check=False, preexec_fn=limited(soft, hard_limit))
        assert p.returncode == 0, f"{depth} levels, nofile {soft}:{hard_limit}: exit {p.returncode}: {p.stderr[-300:]}"
        unsquashfs_extract(img, f"{d}/out-{hard_limit}")
        check(f"{d}/out-{hard_limit}", depth)
        log(f"ok: {depth} levels pack with -j2 under nofile {soft}:{hard_limit}; unsquashfs gives them back")


def test_400_levels():
    pack_under_limit(400)


def test_1000_levels():
    pack_under_limit(1000)


if __name__ == "__main__":
    main([test_400_levels, test_1000_levels])
