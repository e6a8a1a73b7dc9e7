"""CLI expectations for the read-command tests (extract, list, cat, info, verify, diff): sqar's
exit codes and messages. Everything else comes from sqartest."""
import os

# mksquashfs* live in sqartest; imported here too for tests that take them from this module.
from sqartest import SQAR, mksquashfs, mksquashfs_supports, run  # noqa: F401

COMPRESSORS = ["gzip", "xz", "lzo", "lz4", "zstd"]


def sqar_create_image(src, image, *args):
    """Builds image with `sqar create`; its failure fails the test (it is the product)."""
    run([SQAR, "create", "-q", *args, src, image])


def sqar(*args, check=True, **kw):
    return run([SQAR, *args], check=check, **kw)


def expect_fail(args, code, *needles):
    """Runs sqar ARGS, asserts exit code `code` and that stderr names every needle."""
    p = run([SQAR, *args], check=False)
    if p.returncode != code:
        raise AssertionError(f"sqar {args} exited {p.returncode}, expected {code}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    for n in needles:
        if n not in p.stderr:
            raise AssertionError(f"sqar {args}: stderr does not mention {n!r}: {p.stderr!r}")
    return p


def tree_files(root):
    """Every path below root, relative, like `sqar list` prints them."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)
