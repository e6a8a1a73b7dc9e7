#!/usr/bin/env python3
"""`sqar create` command lines a user gets wrong or runs for the first time: an --exclude-from
that is a directory or cannot be read is a usage error naming the path and the cause (exit 2,
nothing written); the README's nightly `--force --reuse IMAGE ... IMAGE` works on its first
night (no IMAGE yet) and over a damaged one, with a one-line note, while --reuse-strict keeps
the error; `-` as IMAGE is refused, naming the alternatives, and so is a device or FIFO."""
import os
import stat

from sqartest import SQAR, log, main, pseudo_random, run, tempdir, unsquashfs_extract, write


def small_tree(root):
    write(f"{root}/a.log", pseudo_random(300_000, 1))
    write(f"{root}/sub/b.log", b"b\n" * 1000)
    return root


def same_content(src, out):
    for d, _, names in os.walk(src):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), src)
            assert open(f"{out}/{rel}", "rb").read() == open(f"{src}/{rel}", "rb").read(), f"{rel} differs"


def test_exclude_from_a_directory_or_an_unreadable_file():
    with tempdir() as d:
        src = small_tree(f"{d}/src")
        os.makedirs(f"{d}/patterns.d")
        # /proc/self/mem opens for anyone (root too) and fails on the first read (EIO).
        for path, cause in ((f"{d}/patterns.d", "Is a directory"), (f"{d}/absent", "No such file or directory"),
                            ("/proc/self/mem", "Input/output error")):
            p = run([SQAR, "create", "--exclude-from", path, src, f"{d}/img"], check=False)
            assert p.returncode == 2, f"--exclude-from {path}: exit {p.returncode}: {p.stderr}"
            assert f"--exclude-from: {path}: {cause}" in p.stderr, f"--exclude-from {path}: {p.stderr!r}"
            assert not os.path.exists(f"{d}/img"), "an image was written"
            log(f"ok: {p.stderr.splitlines()[0]}")


def nightly(src, img, *extra):
    """The README's nightly command, as written there (run in IMAGE's directory)."""
    return run([SQAR, "create", *extra, "--force", "--reuse", os.path.basename(img), src, os.path.basename(img)],
               check=False, cwd=os.path.dirname(img))


def test_nightly_reuse_on_its_first_night_and_over_a_damaged_image():
    with tempdir() as d:
        src = small_tree(f"{d}/log")
        img = f"{d}/logs.sqfs"
        # First night: no logs.sqfs yet.
        p = nightly(src, img)
        assert p.returncode == 0, f"first night: exit {p.returncode}: {p.stderr}"
        # The summary goes to stderr too: the note is the one line that says "note:".
        notes = [line for line in p.stderr.splitlines() if "note:" in line]
        assert len(notes) == 1 and "note: --reuse: logs.sqfs: No such file or directory" in notes[0], \
            f"first night: expected one note naming logs.sqfs, got {p.stderr!r}"
        unsquashfs_extract(img, f"{d}/out1")
        same_content(src, f"{d}/out1")
        log(f"ok: first night builds: {notes[0]}")
        # Second night: the image is reused, silently.
        p = nightly(src, img)
        assert p.returncode == 0 and "note:" not in p.stderr, f"second night: exit {p.returncode}: {p.stderr}"
        # A damaged image (cut short, as a full disk leaves it) gives a fresh build too.
        with open(img, "r+b") as f:
            f.truncate(3000)
        p = nightly(src, img)
        assert p.returncode == 0, f"damaged OLD: exit {p.returncode}: {p.stderr}"
        notes = [line for line in p.stderr.splitlines() if "note:" in line]
        assert len(notes) == 1 and "note: --reuse: logs.sqfs:" in notes[0], p.stderr
        unsquashfs_extract(img, f"{d}/out2")
        same_content(src, f"{d}/out2")
        run([SQAR, "verify", img])
        log(f"ok: a damaged OLD gives a fresh build: {notes[0]}")
        # --reuse-strict keeps the error, and writes nothing.
        os.unlink(img)
        p = nightly(src, img, "--reuse-strict")
        assert p.returncode == 1 and "--reuse: logs.sqfs: No such file or directory" in p.stderr, \
            f"--reuse-strict: exit {p.returncode}: {p.stderr}"
        assert not os.path.exists(img), "--reuse-strict: an image was written"
        log(f"ok: --reuse-strict: {p.stderr.strip()}")


def test_a_device_or_fifo_as_image_is_refused_and_kept():
    """The image is written to a new file renamed over IMAGE: over /dev/null (or a symlink to
    it) or a FIFO that would put a regular file in the device's place. Refused, with or
    without --force, and the node stays what it was."""
    with tempdir() as d:
        src = small_tree(f"{d}/src")
        os.mkfifo(f"{d}/fifo")
        os.symlink("/dev/null", f"{d}/null-link")
        for image, kind in (("/dev/null", "character device"), (f"{d}/null-link", "character device"),
                            (f"{d}/fifo", "FIFO")):
            for force in ([], ["--force"]):
                p = run([SQAR, "create", "-q", *force, src, image], check=False)
                assert p.returncode == 1 and f"{image}: is a {kind}, not a regular file" in p.stderr, p.stderr
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISFIFO(os.lstat(f"{d}/fifo").st_mode)
        assert os.readlink(f"{d}/null-link") == "/dev/null"
        p = run([SQAR, "create", "-q", src, d], check=False)
        assert p.returncode == 1 and f"{d}: is a directory" in p.stderr, p.stderr
        log(f"ok: {p.stderr.strip()}")


def test_exclude_from_standard_input_and_options_that_need_another():
    """--exclude-from - reads the patterns from standard input, as tar -X - does; with --tar -
    (standard input read twice) it is a usage error, as are --tar-memory without --tar and
    --reuse-strict without --reuse, and list's two output formats at once."""
    with tempdir() as d:
        src = small_tree(f"{d}/src")
        run([SQAR, "create", "-q", "--exclude-from", "-", src, f"{d}/img"], input="# logs\nsub\n")
        listed = run([SQAR, "list", f"{d}/img"]).stdout.split()
        assert listed == ["a.log"], listed
        for args, says in ((["--tar", "-", "--exclude-from", "-"], "would both read standard input"),
                           (["--tar-memory", "1M", src], "--tar-memory applies only with --tar"),
                           (["--reuse-strict", src], "--reuse-strict applies only with --reuse")):
            p = run([SQAR, "create", *args, f"{d}/other"], check=False, input="")
            assert p.returncode == 2 and says in p.stderr, (args, p.returncode, p.stderr)
            assert not os.path.exists(f"{d}/other"), args
        p = run([SQAR, "append", "--tar", "-", "--exclude-from", "-", f"{d}/img"], check=False, input="")
        assert p.returncode == 2 and "would both read standard input" in p.stderr, p.stderr
        # Refused before a byte of standard input is read: it is the archive, not patterns.
        write(f"{d}/stream.tar", b"x" * (1 << 20))
        for cmd in (["create", "--tar", "-", "--exclude-from", "-", f"{d}/other"],
                    ["append", "--tar", "-", "--exclude-from", "-", f"{d}/img"]):
            with open(f"{d}/stream.tar", "rb") as stream:
                p = run([SQAR, *cmd], check=False, stdin=stream)
                assert p.returncode == 2 and os.lseek(stream.fileno(), 0, os.SEEK_CUR) == 0, (cmd, p.stderr)
        # An empty argument (an unset variable) names no file; '-' is no image for append or merge.
        for cmd, says in ((["create", src, ""], "empty IMAGE"), (["create", "", f"{d}/other"], "empty SOURCE"),
                          (["append", "-", src], "IMAGE cannot be '-'"), (["append", f"{d}/img", ""], "empty SOURCE"),
                          (["merge", "-", f"{d}/img", f"{d}/other"], "an IMAGE cannot be '-'"),
                          (["merge", f"{d}/img", ""], "empty OUT")):
            p = run([SQAR, *cmd], check=False)
            assert p.returncode == 2 and says in p.stderr, (cmd, p.returncode, p.stderr)
        for args in (["-0", "--json"], ["--json", "-0"]):
            p = run([SQAR, "list", *args, f"{d}/img"], check=False)
            assert p.returncode == 2 and "choose one" in p.stderr, (args, p.stderr)
        log("ok: --exclude-from - reads standard input; options that need another are usage errors")


def test_mksquashfs_and_unsquashfs_spellings_are_named():
    """mksquashfs's one-dash options were read as clusters of short options ("-comp xz" said
    "unknown compressor 'omp'"): each is named with sqar's spelling (exit 2, nothing written),
    while a value that looks like one (--exclude -e) and clusters of sqar's own flags still work."""
    with tempdir() as d:
        src = small_tree(f"{d}/src")
        for cmd, word, hint in ((["create", "-comp", "xz", src], "-comp", "-c/--compressor"),
                                (["create", "-noappend", src], "-noappend", "not needed, sqar create always writes a new image"),
                                (["create", "-all-root", src], "-all-root", "--all-root"),
                                (["create", "-e", "sub", src], "-e", "--exclude"),
                                (["create", "-fstime", "0", src], "-fstime", "SOURCE_DATE_EPOCH")):
            p = run([SQAR, *cmd, f"{d}/img"], check=False)
            assert p.returncode == 2 and f"'{word}' is mksquashfs's option; sqar's: {hint}" in p.stderr, \
                (cmd, p.stderr)
            assert not os.path.exists(f"{d}/img"), cmd
        run([SQAR, "create", "-qf", "--exclude", "-e", "-b", "4K", src, f"{d}/img"])
        p = run([SQAR, "extract", f"{d}/img", "-d", f"{d}/out"], check=False)
        assert p.returncode == 2 and "'-d' is unsquashfs's option; sqar's: -C/--directory DIR" in p.stderr, p.stderr
        log("ok: mksquashfs and unsquashfs spellings are named with sqar's")


if __name__ == "__main__":
    main([test_exclude_from_a_directory_or_an_unreadable_file,
          test_exclude_from_standard_input_and_options_that_need_another,
          test_mksquashfs_and_unsquashfs_spellings_are_named,
          test_nightly_reuse_on_its_first_night_and_over_a_damaged_image,
          test_a_device_or_fifo_as_image_is_refused_and_kept])
