"""sqar create: dedup never compresses a duplicate, output is deterministic, failures leave
nothing behind, and the manifest trailer is invisible to other readers."""
import base64
import contextlib
import grp
import json
import os
import pwd
import re
import resource
import signal
import stat
import subprocess
import time

from sqartest import (AS_NOBODY, SQAR, check_sanitizers, compare_trees, dir_without_o_tmpfile, image_in_progress,
                      kernel_mount, kernel_reports_holes, kernel_supports, leftovers, log, main, make_full_tree, mksquashfs,
                      mtime_seconds, need_root,
                      o_tmpfile_works, pseudo_random, run, set_xattr, skip, sqar_create, tempdir, unsquashfs_extract, write,
                      xattrs_of)


def test_duplicates_are_never_compressed():
    with tempdir() as d:
        text = b"".join(b"row %d of a dump with repeated content\n" % i for i in range(60000))  # ~2.3 MB
        for i in range(8):
            write(f"{d}/src/copy-{i}.txt", text)
        write(f"{d}/src/other.txt", text[::-1])
        st = sqar_create(f"{d}/src", f"{d}/a.sqfs", "-c", "zstd", "-l", "3")
        assert st["dedup_files"] == 7, st
        assert st["dedup_bytes"] == 7 * len(text), st
        # Only the unique bytes ever reach the codec (full blocks; tails go to one fragment).
        assert st["codec_input_bytes"] <= 2 * len(text) + 131072, st
        nodedup = sqar_create(f"{d}/src", f"{d}/b.sqfs", "-c", "zstd", "-l", "3", "--no-dedup")
        assert nodedup["codec_input_bytes"] >= 9 * (len(text) - 131072), nodedup
        # The filesystems, not the files: the trailers after them are a few fixed pages.
        assert st["image_bytes"] * 4 < nodedup["image_bytes"], (st["image_bytes"], nodedup["image_bytes"])
        # Shared blocks are visible to unsquashfs as the same start block.
        out = f"{d}/out"
        unsquashfs_extract(f"{d}/a.sqfs", out)
        compare_trees(f"{d}/src", out, "unsquashfs(dedup)")
        verified = sqar_create(f"{d}/src", f"{d}/c.sqfs", "--verify-dedup")
        assert verified["dedup_files"] == 7, verified


def test_large_duplicates_are_hashed_not_compressed():
    with tempdir() as d:
        blob = pseudo_random(3 << 20, 9)  # > one read unit: takes the hash-first pass
        for i in range(4):
            write(f"{d}/src/movie-{i}.mp4", blob)
        st = sqar_create(f"{d}/src", f"{d}/m.sqfs", "-c", "zstd", "-l", "15")
        assert st["dedup_files"] == 3, st
        assert st["blocks_incompressible"] >= 20, f"random data was not detected as incompressible: {st}"
        assert st["codec_input_bytes"] == 0, st
        assert os.path.getsize(f"{d}/m.sqfs") < len(blob) + (1 << 20)


def test_output_is_identical_for_any_thread_count():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        for i in range(300):
            write(f"{d}/src/many/{i % 17}/f{i}", pseudo_random(i * 37 % 5000, i % 50))
        env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
        images = []
        for j in (1, 2, 4, 8):
            img = f"{d}/j{j}.sqfs"
            sqar_create(src, img, "-j", str(j), "-b", "16K", env=env)
            images.append(open(img, "rb").read())
        sqar_create(src, f"{d}/again.sqfs", "-j", "3", "-b", "16K", env=env)
        images.append(open(f"{d}/again.sqfs", "rb").read())
        assert all(i == images[0] for i in images), "images differ between thread counts or runs"
        log(f"ok: 5 builds byte-identical ({len(images[0])} bytes)")


def test_xattrs_read_the_same_without_listxattrat():
    # Linux 6.13+ lists xattrs relative to the open directory (listxattrat); older kernels take
    # the path-based calls. SQAR_TEST_NO_LISTXATTRAT forces the latter: the images must match.
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
        sqar_create(src, f"{d}/new.sqfs", env=env)
        sqar_create(src, f"{d}/old.sqfs", env=dict(env, SQAR_TEST_NO_LISTXATTRAT="1"))
        assert open(f"{d}/new.sqfs", "rb").read() == open(f"{d}/old.sqfs", "rb").read(), "xattr paths differ"
        out = f"{d}/out"
        unsquashfs_extract(f"{d}/old.sqfs", out)
        compare_trees(src, out, "unsquashfs(path-based xattrs)")


def test_xattrs_of_files_are_read_from_the_open_file():
    # The scan leaves the attributes of regular files with content to the data phase, which
    # reads them from the file it opens anyway (first read unit, or the hashing pass of large
    # files that share a size). Every file keeps its own attributes, duplicates included.
    with tempdir() as d:
        src = f"{d}/src"
        big = pseudo_random(3 << 20, 7)
        write(f"{src}/big-a.bin", big)  # same size and content: hashed first, b shares a's data
        write(f"{src}/big-b.bin", big)
        write(f"{src}/big-c.bin", pseudo_random(3 << 20, 8))  # same size, other content
        write(f"{src}/unique.bin", pseudo_random((5 << 20) + 3, 9))  # several read units
        write(f"{src}/sub/small-a", b"same")  # small duplicates: hashed in memory
        write(f"{src}/sub/small-b", b"same")
        write(f"{src}/sub/empty", b"")  # no content: its attributes come from the scan
        values = {"big-a.bin": b"a", "big-b.bin": b"b", "big-c.bin": b"c", "unique.bin": b"u" * 300,
                  "sub/small-a": b"", "sub/small-b": b"sb", "sub/empty": b"e"}
        for name, value in values.items():
            os.setxattr(f"{src}/{name}", "user.which", value)
        for i in range(12):  # a name list longer than the first 256-byte try
            os.setxattr(f"{src}/sub/small-b", f"trusted.a-rather-long-attribute-name-number-{i:02d}", b"%d" % i)
        st = sqar_create(src, f"{d}/a.sqfs", "-j", "2")
        assert st["dedup_files"] == 2, st  # big-b and small-b
        unsquashfs_extract(f"{d}/a.sqfs", f"{d}/out")
        compare_trees(src, f"{d}/out", "unsquashfs (attributes read from open files)")
        for name, value in values.items():
            assert os.getxattr(f"{d}/out/{name}", "user.which") == value, name
        sqar_create(src, f"{d}/none.sqfs", "--no-xattrs")
        unsquashfs_extract(f"{d}/none.sqfs", f"{d}/none")
        for name in values:
            assert not xattrs_of(f"{d}/none/{name}"), f"--no-xattrs stored attributes of {name}"
        log("ok: 7 files' attributes, duplicates and large files included; none with --no-xattrs")


def test_existing_image_is_never_overwritten_without_force():
    with tempdir() as d:
        write(f"{d}/src/f", b"x")
        write(f"{d}/img", b"precious")
        p = run([SQAR, "create", f"{d}/src", f"{d}/img"], check=False)
        assert p.returncode != 0 and "already exists" in p.stderr and "--force" in p.stderr, p.stderr
        assert open(f"{d}/img", "rb").read() == b"precious"
        run([SQAR, "create", "-q", "--force", f"{d}/src", f"{d}/img"])
        assert open(f"{d}/img", "rb").read(4) == b"hsqs"
        assert not leftovers(f"{d}/img")
        # A name of NAME_MAX bytes: the temporary name beside it must still fit.
        longest = f"{d}/" + "n" * 250 + ".sqfs"
        for _ in range(2):
            run([SQAR, "create", "-q", "--force", f"{d}/src", longest])
            assert open(longest, "rb").read(4) == b"hsqs"
            assert sorted(os.listdir(d)) == sorted(["src", "img", os.path.basename(longest)]), os.listdir(d)
        # A file given as a SOURCE and as IMAGE would be lost to its own image, even with --force.
        write(f"{d}/notes.txt", b"keep me")
        p = run([SQAR, "create", "--force", f"{d}/notes.txt", f"{d}/src", f"{d}/notes.txt"], check=False)
        assert p.returncode == 1 and "is also a SOURCE" in p.stderr, p.stderr
        assert open(f"{d}/notes.txt", "rb").read() == b"keep me"


def test_image_inside_its_source_is_not_packed():
    with tempdir() as d:
        write(f"{d}/src/a.txt", b"alpha\n")
        write(f"{d}/src/sub/b.txt", b"beta\n")
        for args in ([], ["--force"]):  # a fresh image, then one replacing the old image in place
            sqar_create(f"{d}/src", f"{d}/src/sub/self.sqfs", *args)
            listing = run(["unsquashfs", "-lls", "-d", "", f"{d}/src/sub/self.sqfs"]).stdout
            fields = [line.split(None, 5) for line in listing.splitlines() if line[:1] in ("-", "d")]
            names = sorted(f[5] if len(f) > 5 else "" for f in fields)  # the root's name is empty
            assert names == ["", "/a.txt", "/sub", "/sub/b.txt"], listing
        assert not leftovers(f"{d}/src/sub/self.sqfs")


def test_bad_usage_is_explained():
    with tempdir() as d:
        write(f"{d}/src/f", b"x")
        # Usage errors exit 2 and point at --help, whichever option is wrong.
        for args, needle in ((["-b", "3000"], "block size"), (["-c", "brotli"], "compressor"),
                             (["-c", "gzip", "-l", "13"], "level 13 is out of range for gzip (1-12)"),
                             (["-l", "99"], "out of range for zstd"), (["-c", "xz", "-l", "10"], "(0-9)"),
                             (["-l", "4294967305"], "invalid level '4294967305'"),  # not 2^32 + 9 as 9
                             (["--no-such-option"], "unknown option '--no-such-option'"), ([], "SOURCE")):
            p = run([SQAR, "create", *args, f"{d}/src", f"{d}/img"] if args else [SQAR, "create", f"{d}/src"],
                    check=False)
            assert p.returncode == 2, (args, p.returncode, p.stderr)
            assert needle in p.stderr and "Try 'sqar create --help'" in p.stderr, p.stderr
        p = run([SQAR, "create", f"{d}/src", f"{d}/img", "-l"], check=False)
        assert p.returncode == 2 and "option '-l' needs a value" in p.stderr, p.stderr
        p = run([SQAR, "create", f"{d}/missing", f"{d}/img"], check=False)
        assert p.returncode == 1 and f"{d}/missing" in p.stderr and "No such file" in p.stderr, p.stderr
        assert not os.path.exists(f"{d}/img") and not leftovers(f"{d}/img")
        p = run([SQAR, "create", f"{d}/src", f"{d}/no-such-dir/img"], check=False)
        assert p.returncode == 1 and f"{d}/no-such-dir/img: cannot create it in {d}/no-such-dir" in p.stderr, \
            p.stderr
        assert "Usage: sqar create" in run([SQAR, "create", "--help"]).stdout


def test_unreadable_file_names_path_and_cause():
    need_root()
    with tempdir() as d:
        os.chmod(d, 0o777)
        write(f"{d}/src/ok", b"fine")
        write(f"{d}/src/secret", b"hidden", 0o000)
        os.chmod(f"{d}/src", 0o755)
        p = run([*AS_NOBODY, SQAR, "create", f"{d}/src", f"{d}/img"], check=False)
        assert p.returncode == 1 and f"{d}/src/secret" in p.stderr and "Permission denied" in p.stderr, p.stderr
        assert not os.path.exists(f"{d}/img") and not leftovers(f"{d}/img")
        p = run([*AS_NOBODY, SQAR, "create", "--json", "--skip-unreadable", f"{d}/src", f"{d}/img"], check=False)
        assert p.returncode == 0 and "warning" in p.stderr and "secret" in p.stderr, p.stderr
        listing = run(["unsquashfs", "-l", f"{d}/img"]).stdout
        assert "squashfs-root/ok" in listing and "secret" not in listing, listing
        # The summary counts what was stored: the 4 bytes of ok, not the 6 left out.
        summary = json.loads(p.stdout)
        assert summary["bytes_in"] == 4 and summary["files"] == 1, summary
        # A directory that can be listed but not searched (r--): the directory is what is
        # named and stored empty, with the entry that failed as the cause.
        os.chmod(f"{d}/src/secret", 0o644)
        write(f"{d}/src/listable/inner", b"i")
        os.chmod(f"{d}/src/listable", 0o444)
        p = run([*AS_NOBODY, SQAR, "create", "-f", "--skip-unreadable", f"{d}/src", f"{d}/img"], check=False)
        os.chmod(f"{d}/src/listable", 0o755)
        assert p.returncode == 0 and f"{d}/src/listable: an entry cannot be read: {d}/src/listable/inner" in p.stderr \
            and "stored as an empty directory" in p.stderr, p.stderr


# The build-failure tests below run twice: where O_TMPFILE gives an unnamed image, and on a
# bindfs (FUSE) mount without O_TMPFILE, where sqar writes IMAGE.sqar-tmp-XXXXXX and its error
# paths and signal handlers must remove that name. Each also runs with --force over an old
# image (the replacement is staged under a name), which must stay byte-identical.
OLD_IMAGE = b"the old image, which a failed --force build must leave as it was\n" * 64


def place_old_image(img, force):
    if force:
        write(img, OLD_IMAGE)


def check_failed_build_left_nothing(img, force, what):
    """After a failed build into img's directory: only the old image (unchanged), if any."""
    d = os.path.dirname(img)
    names = sorted(os.listdir(d))
    if force:
        assert names == [os.path.basename(img)], f"{what}: left behind: {names}"
        assert open(img, "rb").read() == OLD_IMAGE, f"{what}: the old image changed"
    else:
        assert names == [], f"{what}: left behind: {names}"


def no_space_left(tiny, force):
    """tiny: a 256 KiB filesystem. The image runs out of space in the data phase, then (no
    data, a large directory table) in the metadata phase, where the directory table goes to a
    scratch file first."""
    d = os.path.dirname(tiny)
    args = ["--force"] if force else []
    for phase, src in (("data", f"{d}/src"), ("metadata", f"{d}/meta")):
        img = f"{tiny}/img-{phase}"
        place_old_image(img, force)
        p = run([SQAR, "create", *args, src, img], check=False)
        assert p.returncode == 1 and "no space left" in p.stderr.lower(), p.stderr
        assert "libsquashfs error" not in p.stderr, p.stderr
        check_failed_build_left_nothing(img, force, f"no space left ({phase} phase{', --force' if force else ''})")
        if force:
            os.unlink(img)
        log(f"ok: {p.stderr.strip()}")


def make_no_space_sources(d):
    write(f"{d}/src/big", pseudo_random(3 << 20, 5))
    for i in range(4000):
        os.makedirs(f"{d}/meta/{pseudo_random(90, i).hex()}")


@contextlib.contextmanager
def tiny_tmpfs(path):
    os.makedirs(path)
    run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", path])
    try:
        yield path
    finally:
        run(["umount", path])


def test_no_space_left_is_reported_and_cleaned_up():
    need_root()
    with tempdir() as d:
        make_no_space_sources(d)
        with tiny_tmpfs(f"{d}/tiny") as tiny:
            for force in (False, True):
                no_space_left(tiny, force)


def test_no_space_left_without_o_tmpfile():
    need_root()
    with tempdir() as d:
        make_no_space_sources(d)
        with tiny_tmpfs(f"{d}/tiny-lower"), dir_without_o_tmpfile(f"{d}/tiny-lower", f"{d}/tiny") as tiny:
            for force in (False, True):
                no_space_left(tiny, force)


def interrupt(src, out, force, signals):
    """Interrupts builds of out/img with each signal while the data phase runs."""
    img = f"{out}/img"
    named = not o_tmpfile_works(out)  # the fallback: the image has a name while it is written
    for sig in signals:
        place_old_image(img, force)
        proc = subprocess.Popen([SQAR, "create", "-q", "--no-dedup", *(["--force"] if force else []), src, img],
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not image_in_progress(proc.pid, img) and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.01)
            assert image_in_progress(proc.pid, img), "temporary image never appeared"
            time.sleep(0.3)
            if named:
                assert leftovers(img), f"no {os.path.basename(img)}.sqar-tmp-* in {out}: {os.listdir(out)}"
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        check_sanitizers(proc.args, proc.returncode, err)
        assert proc.returncode != 0, f"{sig.name}: the build was not interrupted"
        check_failed_build_left_nothing(img, force, f"{sig.name}{' with --force' if force else ''}")
        if force:
            os.unlink(img)
        log(f"ok: {sig.name}{' with --force' if force else ''} left nothing behind")


def test_signals_the_caller_ignores_stay_ignored():
    """`nohup sqar create ...`, a shell's background job (SIGINT and SIGQUIT ignored), `trap ''
    HUP`: a signal sqar inherits ignored is left ignored, as tar leaves it, so logging out
    does not end a nightly build. The build completes and the image verifies."""
    with tempdir() as d:
        src = f"{d}/src"
        for i in range(6):
            write(f"{src}/f{i}", b"".join(b"%d alpha beta gamma %d\n" % (j, j * i % 977) for j in range(150_000)))
        img = f"{d}/img.sqfs"
        ignored = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE)

        def ignore():
            for sig in ignored:
                signal.signal(sig, signal.SIG_IGN)
        proc = subprocess.Popen([SQAR, "create", "-q", "-j1", "-c", "xz", "-l", "9", "--no-dedup", src, img],
                                stderr=subprocess.PIPE, text=True, preexec_fn=ignore)
        deadline = time.monotonic() + 60
        while not image_in_progress(proc.pid, img) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        assert image_in_progress(proc.pid, img), f"no image in progress (exit {proc.poll()})"
        for sig in ignored:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=300)
        check_sanitizers(proc.args, proc.returncode, err)
        assert proc.returncode == 0, f"exit {proc.returncode} after ignored signals: {err}"
        run([SQAR, "verify", "-q", img])
        log("ok: SIGHUP, SIGINT, SIGQUIT and SIGPIPE inherited ignored: the build completed")


def make_huge_source(d, files=4):
    """Holes of 1 TiB a file (8 million sparse blocks, ~2 s each on the CI machine): a build
    that runs long enough to be interrupted, whose image stays a few hundred KB."""
    os.makedirs(f"{d}/src")
    for i in range(files):
        with open(f"{d}/src/huge{i}", "wb") as f:
            f.truncate(1 << 40)
    return f"{d}/src"


def test_interrupt_leaves_no_partial_image():
    with tempdir() as d:
        src = make_huge_source(d)
        os.makedirs(f"{d}/out")
        # SIGKILL cannot be caught: only an image that has no name until it is complete
        # (O_TMPFILE) leaves nothing behind then.
        for force in (False, True):
            interrupt(src, f"{d}/out", force,
                      (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGPIPE, signal.SIGKILL))


def test_interrupt_without_o_tmpfile_removes_the_named_image():
    with tempdir() as d:
        src = make_huge_source(d)
        with dir_without_o_tmpfile(f"{d}/lower", f"{d}/out") as out:
            assert not o_tmpfile_works(out)
            # The signal handlers remove IMAGE.sqar-tmp-XXXXXX (SIGKILL would leave it: it
            # cannot be caught, which is why O_TMPFILE is used where it exists).
            for force in (False, True):
                interrupt(src, out, force, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
                                            signal.SIGPIPE))


def file_size_limit(d, out, force):
    img = f"{out}/img"
    place_old_image(img, force)
    p = subprocess.run([SQAR, "create", "-q", *(["--force"] if force else []), f"{d}/src", img],
                       stderr=subprocess.PIPE, text=True,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20)))
    check_sanitizers(p.args, p.returncode, p.stderr)
    assert p.returncode == 1 and img in p.stderr and "File too large" in p.stderr, (p.returncode, p.stderr)
    check_failed_build_left_nothing(img, force, f"file size limit{' with --force' if force else ''}")
    if force:
        os.unlink(img)
    log(f"ok: {p.stderr.strip()}")


def test_file_size_limit_is_an_error_not_a_kill():
    with tempdir() as d:
        write(f"{d}/src/noise", pseudo_random(4 << 20, 3))  # incompressible: the image is > 1 MiB
        os.makedirs(f"{d}/out")
        for force in (False, True):
            file_size_limit(d, f"{d}/out", force)


def test_file_size_limit_without_o_tmpfile():
    with tempdir() as d:
        write(f"{d}/src/noise", pseudo_random(4 << 20, 3))
        with dir_without_o_tmpfile(f"{d}/lower", f"{d}/out") as out:
            for force in (False, True):
                file_size_limit(d, out, force)


def test_image_mode_follows_umask_and_the_replaced_image():
    with tempdir() as d:
        write(f"{d}/src/f", b"secret")
        run([SQAR, "create", "-q", f"{d}/src", f"{d}/private"], preexec_fn=lambda: os.umask(0o077))
        assert stat.S_IMODE(os.stat(f"{d}/private").st_mode) == 0o600, oct(os.stat(f"{d}/private").st_mode)
        run([SQAR, "create", "-q", f"{d}/src", f"{d}/shared"], preexec_fn=lambda: os.umask(0o002))
        assert stat.S_IMODE(os.stat(f"{d}/shared").st_mode) == 0o664, oct(os.stat(f"{d}/shared").st_mode)
        # --force over an existing image replaces it and keeps its permissions (and, for root,
        # its owner). The new source differs, so the replaced image must differ too.
        os.chmod(f"{d}/private", 0o640)
        if os.geteuid() == 0:
            os.chown(f"{d}/private", 1234, 5678)
        old = open(f"{d}/private", "rb").read()
        old_inode = os.stat(f"{d}/private").st_ino
        write(f"{d}/src/f", b"the new content of the replacing image")
        run([SQAR, "create", "-q", "--force", f"{d}/src", f"{d}/private"], preexec_fn=lambda: os.umask(0o022))
        st = os.stat(f"{d}/private")
        assert open(f"{d}/private", "rb").read() != old, "--force left the old image in place"
        assert st.st_ino != old_inode, "--force rewrote the old image in place instead of replacing it"
        assert run([SQAR, "cat", f"{d}/private", "f"]).stdout == "the new content of the replacing image"
        assert stat.S_IMODE(st.st_mode) == 0o640, oct(st.st_mode)
        if os.geteuid() == 0:
            assert (st.st_uid, st.st_gid) == (1234, 5678), (st.st_uid, st.st_gid)
        assert not leftovers(f"{d}/private"), os.listdir(d)
        log("ok: new images follow the umask; a replaced image has the new content, and keeps its mode and owner")


def test_image_made_by_someone_else_meanwhile_is_not_replaced():
    with tempdir() as d:
        make_huge_source(d, files=1)  # seconds of work
        proc = subprocess.Popen([SQAR, "create", "-q", "--no-dedup", f"{d}/src", f"{d}/img"],
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + 10
            while not image_in_progress(proc.pid, f"{d}/img") and time.time() < deadline:
                time.sleep(0.05)
            assert proc.poll() is None, "the build ended before the other image could be made"
            write(f"{d}/img", b"someone else's")
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 1 and f"{d}/img: already exists" in err, (proc.returncode, err)
        assert open(f"{d}/img", "rb").read() == b"someone else's", "an image made meanwhile was replaced"
        assert sorted(os.listdir(d)) == ["img", "src"], os.listdir(d)
        log(f"ok: {err.strip()}")


def test_json_summary_is_valid_for_any_image_name():
    # File names are bytes: a name that is not UTF-8 still gives valid JSON, and Python gets
    # the bytes back (surrogateescape); quotes, backslashes and control characters are escaped.
    with tempdir() as d:
        write(f"{d}/src/f", b"x")
        for name in (b"caf\xe9.sqfs", b'q"uote\\back.sqfs', b"tab\tnl\n.sqfs", "ünï.sqfs".encode()):
            image = os.fsencode(d) + b"/" + name
            p = subprocess.run([os.fsencode(SQAR), b"create", b"--json", os.fsencode(f"{d}/src"), image],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert p.returncode == 0, p.stderr
            summary = json.loads(p.stdout.decode("utf-8"))  # strict UTF-8: raw bytes would fail here
            assert os.fsencode(summary["image"]) == image, (summary["image"], image)
            os.unlink(image)
        log("ok: --json names images that are not UTF-8, and escapes what JSON needs")


def test_json_keys_carry_the_numbers_of_the_text_summary():
    """Every number the text summary prints is the JSON key of the same name."""
    with tempdir() as d:
        make_full_tree(f"{d}/src")
        write(f"{d}/src/random.bin", pseudo_random(3 << 20, 7))   # incompressible: stored raw
        p = run([SQAR, "create", f"{d}/src", f"{d}/text.sqfs"])
        assert p.stdout == "", p.stdout  # the summary is not data: standard error
        text = p.stderr
        j = json.loads(run([SQAR, "create", "--json", f"{d}/src", f"{d}/json.sqfs"]).stdout)
        m = re.search(r": (\d+) entr\w+ \((\d+) files?, (\d+) dirs?, (\d+) symlinks?, (\d+) hard links?, (\d+) other\)",
                      text)
        assert m, text
        assert [int(x) for x in m.groups()] == [j["entries"], j["files"], j["directories"], j["symlinks"],
                                                j["hardlinks"], j["devices"] + j["fifos"] + j["sockets"]], (text, j)
        m = re.search(r"blocks: (\d+) compressed, (\d+) stored raw \((\d+) detected incompressible\), (\d+) sparse, "
                      r"(\d+) fragment blocks?", text)
        assert m, text
        assert [int(x) for x in m.groups()] == [j["blocks_compressed"], j["blocks_stored_raw"],
                                                j["blocks_incompressible"], j["blocks_sparse"], j["fragments"]], (text, j)
        assert j["blocks_stored_raw"] >= 24, j   # the 3 MiB of random bytes
        m = re.search(r"dedup: (\d+) duplicate files?", text)
        assert m and int(m.group(1)) == j["dedup_files"] and j["dedup_files"] > 0, (text, j)
        log(f"ok: text and JSON summaries agree ({j['blocks_stored_raw']} blocks stored raw)")


def test_times_squashfs_cannot_store_are_clamped_with_a_warning():
    with tempdir() as d:
        write(f"{d}/src/a-old", b"1")
        write(f"{d}/src/b-new", b"2")
        write(f"{d}/src/c-now", b"3")
        os.utime(f"{d}/src/a-old", (0, -315619200))     # 1960
        os.utime(f"{d}/src/b-new", (0, 7258118400))     # 2200
        p = run([SQAR, "create", "-q", f"{d}/src", f"{d}/img"], check=False)
        assert p.returncode == 0, p.stderr
        assert p.stderr.count("warning") == 1 and f"{d}/src/a-old: modification time -315619200 s is before 1970" \
            in p.stderr and f"also clamped to 1970-01-01 or 2106-02-07, whichever is nearer: {d}/src/b-new." \
            in p.stderr, p.stderr
        out = f"{d}/out"
        unsquashfs_extract(f"{d}/img", out)
        assert os.lstat(f"{out}/a-old").st_mtime == 0 and os.lstat(f"{out}/b-new").st_mtime == 2**32 - 1
        assert os.lstat(f"{out}/c-now").st_mtime == mtime_seconds(os.lstat(f"{d}/src/c-now"))
        # SOURCE_DATE_EPOCH clamps every later time to itself, 2200 too: only 1960 is a loss.
        env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
        p = run([SQAR, "create", "-q", f"{d}/src", f"{d}/epoch.sqfs"], check=False, env=env)
        assert p.returncode == 0 and p.stderr.count("warning") == 1 and "a-old" in p.stderr, p.stderr
        assert "b-new" not in p.stderr and "2106" not in p.stderr, p.stderr
        unsquashfs_extract(f"{d}/epoch.sqfs", f"{d}/epoch")
        assert os.lstat(f"{d}/epoch/b-new").st_mtime == 1700000000 and os.lstat(f"{d}/epoch/a-old").st_mtime == 0
        # Many such entries: the first ten are named, the rest counted.
        for i in range(12):
            write(f"{d}/src/many/f{i:02}", b"x")
            os.utime(f"{d}/src/many/f{i:02}", (0, -1))
        p = run([SQAR, "create", "-q", f"{d}/src", f"{d}/many.sqfs"], check=False)
        assert p.returncode == 0 and p.stderr.count("warning") == 1, p.stderr
        named = ", ".join([f"{d}/src/b-new"] + [f"{d}/src/many/f{i:02}" for i in range(8)])
        assert f"whichever is nearer: {named} and 4 more entries." in p.stderr, p.stderr
        p = run([SQAR, "create", "-q", "--mtime", "1000", f"{d}/src", f"{d}/img2"], check=False)
        assert p.returncode == 0 and p.stderr == "", p.stderr  # --mtime replaces them all: nothing to say
        log(f"ok: {p.stderr.strip() or 'clamped with one warning'}")


def test_zero_blocks_and_zero_tails_unpack_as_holes():
    # All-zero blocks are stored as sparse blocks, the partial last one too (as mksquashfs
    # does): unsquashfs then leaves holes, so each file takes the same disk space after
    # unpacking either tool's image, and the content is the same.
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/zero-small", b"")
        os.truncate(f"{src}/zero-small", 100 << 10)           # under one block, all zeros
        write(f"{src}/head-then-zeros", b"head")
        os.truncate(f"{src}/head-then-zeros", 320 << 10)      # a zero block and a zero tail
        write(f"{src}/data-then-zero-tail", pseudo_random(200000, 9))
        os.truncate(f"{src}/data-then-zero-tail", 300000)      # the tail past 256 KiB is zeros
        write(f"{src}/data-tail", pseudo_random(150000, 10))   # a tail with data: a fragment
        sqar_create(src, f"{d}/sqar.sqfs")
        mksquashfs(src, f"{d}/mk.sqfs")
        unsquashfs_extract(f"{d}/sqar.sqfs", f"{d}/from-sqar")
        unsquashfs_extract(f"{d}/mk.sqfs", f"{d}/from-mk")
        compare_trees(src, f"{d}/from-sqar", "unsquashfs(zero tails)")
        for name in sorted(os.listdir(src)):
            ours, theirs = os.lstat(f"{d}/from-sqar/{name}").st_blocks, os.lstat(f"{d}/from-mk/{name}").st_blocks
            assert ours == theirs, f"{name}: {ours * 512} bytes allocated after unpacking, mksquashfs' {theirs * 512}"
        assert os.lstat(f"{d}/from-sqar/zero-small").st_blocks == 0
        log("ok: zero blocks and zero tails unpack as holes, as mksquashfs' do")


def test_file_of_millions_of_blocks():
    """A 9 GiB sparse file at -b 4K has 2.36 million blocks: libsquashfs copies an inode's block
    list to the stack, which overflowed (a crash) past 2^21 blocks. The image is made, sqar
    verify checks it, unsquashfs lists the size, and the kernel reads the file's last block."""
    with tempdir() as d:
        src, img = f"{d}/src", f"{d}/img.sqfs"
        os.makedirs(src)
        with open(f"{src}/big", "wb") as f:
            f.truncate(9 << 30)
            f.seek((9 << 30) - 5)
            f.write(b"tail!")
        if os.lstat(f"{src}/big").st_blocks * 512 >= 1 << 30:
            skip("this filesystem does not keep holes")
        run([SQAR, "create", "-q", "-b", "4K", src, img])
        run([SQAR, "verify", img])
        listing = run(["unsquashfs", "-lls", img]).stdout
        assert re.search(r" 9663676416 .*/big$", listing, re.M), listing
        if os.geteuid() == 0 and kernel_supports("zstd"):
            with kernel_mount(img, f"{d}/mnt") as mnt, open(f"{mnt}/big", "rb") as f:
                f.seek((9 << 30) - 4096)
                assert f.read() == bytes(4091) + b"tail!"
        log("ok: 2.36 million blocks: made, verified, listed and read")
        # More than 2^25 blocks is more than sqar's reader takes for one file (it bounds what a
        # crafted inode may claim): refused before anything is read, naming the file, so that
        # no image is made that sqar cannot read back.
        with open(f"{src}/big", "r+b") as f:
            try:
                f.truncate((1 << 25) * 4096 + 1)
            except OSError as e:
                log(f"no 128 GiB sparse file here ({e.strerror}): the limit is not checked")
                return
        os.remove(img)
        p = run([SQAR, "create", "-q", "-b", "4K", src, img], check=False)
        assert p.returncode == 1 and f"{src}/big: 137438953473 bytes are more than 33554432 blocks" in p.stderr, \
            (p.returncode, p.stderr)
        assert not os.path.exists(img) and not leftovers(img), "an image was left behind"
        log("ok: 2^25 + 1 blocks of one file refused: " + p.stderr.strip())


def test_ranges_in_holes_of_large_sparse_files():
    """A large sparse file's 1 MiB ranges that lie wholly in a hole are not read (SEEK_DATA)
    and reach the image as sparse blocks without a buffer of zeros. Files whose first range
    is a hole (and carries the file's xattrs), whose middle is, and that are nothing but a
    hole: unsquashfs gives the same content, xattrs and holes as the source, `sqar verify`
    finds every file's hash right (the hash covers the zeros), mksquashfs's image unpacks to
    the same allocation, and a --reuse rebuild is byte-identical."""
    mib = 1 << 20
    with tempdir() as d:
        src = f"{d}/src"
        os.makedirs(src)
        with open(f"{src}/hole-first", "wb") as f:
            f.truncate(5 * mib)
            f.seek(5 * mib - 100_000)
            f.write(pseudo_random(100_000, 11))
        set_xattr(f"{src}/hole-first", "user.note", b"read with the first range, a hole")
        with open(f"{src}/hole-middle", "wb") as f:
            f.write(pseudo_random(300_000, 12))
            f.seek(6 * mib - 5)
            f.write(b"tail!")
        with open(f"{src}/hole-only", "wb") as f:
            f.truncate(4 * mib)
        if os.lstat(f"{src}/hole-first").st_blocks * 512 >= 5 * mib:
            skip("this filesystem does not keep holes")
        for name in os.listdir(src):  # older than SOURCE_DATE_EPOCH, which would clamp them
            os.utime(f"{src}/{name}", (1_600_000_000, 1_600_000_000))
        env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
        run([SQAR, "create", "-q", src, f"{d}/sqar.sqfs"], env=env)
        run([SQAR, "verify", f"{d}/sqar.sqfs"])
        unsquashfs_extract(f"{d}/sqar.sqfs", f"{d}/from-sqar")
        compare_trees(src, f"{d}/from-sqar", "unsquashfs of sparse files with ranges in holes")
        mksquashfs(src, f"{d}/mk.sqfs")
        unsquashfs_extract(f"{d}/mk.sqfs", f"{d}/from-mk")
        for name in sorted(os.listdir(src)):
            ours, theirs = os.lstat(f"{d}/from-sqar/{name}").st_blocks, os.lstat(f"{d}/from-mk/{name}").st_blocks
            assert ours == theirs, f"{name}: {ours * 512} bytes allocated after unpacking, mksquashfs' {theirs * 512}"
        run([SQAR, "create", "-q", "-f", "--reuse", f"{d}/sqar.sqfs", src, f"{d}/again.sqfs"], env=env)
        with open(f"{d}/sqar.sqfs", "rb") as a, open(f"{d}/again.sqfs", "rb") as b:
            assert a.read() == b.read(), "a --reuse rebuild of the sparse files differs"
        log("ok: ranges in holes are stored as sparse blocks; content, xattrs, holes and hashes hold")


def test_holes_of_same_size_files_are_not_read_for_dedup():
    """Files that share a size are hashed in a pass of their own before dedup decides, and
    --verify-dedup and --reuse read files before their blocks are cut: none of them reads a
    hole. Two sparse files of 64 GiB with a few bytes of data each: the bytes sqar's read calls
    return (the kernel's rchar, counted for reaped children) stay far below their size, the
    files are deduplicated, and the kernel reads them back."""
    need_root()
    gib = 1 << 30
    size = 64 * gib
    with tempdir() as d:
        src = f"{d}/src"
        os.makedirs(src)
        for name in ("vm-a.img", "vm-b.img"):
            with open(f"{src}/{name}", "wb") as f:
                f.truncate(size)
                f.seek(size // 2 + 12345)
                f.write(b"the only data")
        if os.lstat(f"{src}/vm-a.img").st_blocks * 512 >= 1 << 20:
            skip("this filesystem does not keep holes")

        def bytes_read_by(*args):
            def rchar():
                with open("/proc/self/io") as f:
                    return int(next(line for line in f if line.startswith("rchar:")).split()[1])
            before = rchar()
            stats = sqar_create(src, *args)
            return stats, rchar() - before

        for args in ([f"{d}/img.sqfs", "-f"], [f"{d}/img.sqfs", "-f", "--verify-dedup"],
                     [f"{d}/again.sqfs", "--reuse", f"{d}/img.sqfs"]):
            stats, read = bytes_read_by(*args, "-b", "1M")
            assert stats["dedup_files"] == 1, (args, stats)
            assert read < gib, f"create {' '.join(args[1:])} read {read} bytes of two files of {size} with holes"
        with kernel_mount(f"{d}/again.sqfs", f"{d}/mnt") as mnt:
            for name in ("vm-a.img", "vm-b.img"):
                with open(f"{mnt}/{name}", "rb") as f:
                    assert os.fstat(f.fileno()).st_size == size
                    f.seek(size // 2 + 12340)
                    assert f.read(20) == b"\0" * 5 + b"the only data" + b"\0\0", name
        log("ok: two 64 GiB sparse files of one size hashed, compared and reused without reading their holes")


def test_manifest_is_invisible_to_other_readers():
    need_root()
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        sqar_create(src, f"{d}/with.sqfs")
        sqar_create(src, f"{d}/without.sqfs", "--no-manifest")
        a, b = open(f"{d}/with.sqfs", "rb").read(), open(f"{d}/without.sqfs", "rb").read()
        assert len(a) > len(b) and len(a) % 4096 == 0 and len(b) % 4096 == 0
        assert a[96:len(b)] == b[96:], "the manifest changed the filesystem part of the image"
        assert b"SQARMNF1" in a[len(b):len(b) + 8]
        unsquashfs_extract(f"{d}/with.sqfs", f"{d}/out")
        compare_trees(src, f"{d}/out", "unsquashfs(with manifest)", ignore=("dev/socket",))
        with kernel_mount(f"{d}/with.sqfs", f"{d}/mnt") as mnt:
            compare_trees(src, mnt, "kernel(with manifest)", holes=kernel_reports_holes())


def test_big_directory_and_file_over_4gib():
    need_root()
    with tempdir() as d:
        os.makedirs(f"{d}/src/big-dir")
        for i in range(100_000):
            open(f"{d}/src/big-dir/entry-{i:06d}-with-a-longer-name", "wb").close()
        with open(f"{d}/src/over-4g.bin", "wb") as f:
            f.seek((4 << 30) + 12345)
            f.write(b"tail after four gibibytes")
        st = sqar_create(f"{d}/src", f"{d}/big.sqfs", "-b", "1M")
        assert st["blocks_sparse"] >= 4096, st
        with kernel_mount(f"{d}/big.sqfs", f"{d}/mnt") as mnt:
            names = os.listdir(f"{mnt}/big-dir")
            assert len(names) == 100_000
            # Lookups through the directory index, at the start, middle and end.
            for i in (0, 49_999, 99_999):
                os.stat(f"{mnt}/big-dir/entry-{i:06d}-with-a-longer-name")
            with open(f"{mnt}/over-4g.bin", "rb") as f:
                f.seek((4 << 30) + 12345)
                assert f.read() == b"tail after four gibibytes"
                f.seek(3 << 30)
                assert f.read(4096) == bytes(4096)
            assert os.stat(f"{mnt}/over-4g.bin").st_size == (4 << 30) + 12345 + 25
        listing = run(["unsquashfs", "-l", f"{d}/big.sqfs"]).stdout
        assert listing.count("big-dir/entry-") == 100_000


def test_one_file_system_and_owner_options():
    need_root()
    with tempdir() as d:
        write(f"{d}/src/here", b"on the source filesystem")
        os.makedirs(f"{d}/src/mnt")
        run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", f"{d}/src/mnt"])
        try:
            write(f"{d}/src/mnt/elsewhere", b"on another filesystem")
            sqar_create(f"{d}/src", f"{d}/one.sqfs", "--one-file-system", "--uid", "4242", "--gid", "77")
            sqar_create(f"{d}/src", f"{d}/all.sqfs")
        finally:
            run(["umount", f"{d}/src/mnt"])
        one = run(["unsquashfs", "-lln", f"{d}/one.sqfs"]).stdout
        assert "squashfs-root/mnt\n" in one + "\n" and "elsewhere" not in one, one
        assert all(" 4242/77 " in line for line in one.splitlines() if line.startswith(("d", "-"))), one
        assert "mnt/elsewhere" in run(["unsquashfs", "-l", f"{d}/all.sqfs"]).stdout
        # Names, as mksquashfs -force-uid and tar --owner take them, are stored as their ids.
        user, group = pwd.getpwuid(65534).pw_name, grp.getgrgid(0).gr_name
        sqar_create(f"{d}/src/here", f"{d}/named.sqfs", "--uid", user, "--gid", group)
        named = run(["unsquashfs", "-lln", f"{d}/named.sqfs"]).stdout
        assert " 65534/0 " in named, named
        for args, says in ((["--uid", "no-such-user-here"], "no user name or id"),
                           (["--gid", "no-such-group-here"], "no group name or id"),
                           (["--uid", "4294967295"], "0 to 4294967294")):
            p = run([SQAR, "create", *args, f"{d}/src/here", f"{d}/bad.sqfs"], check=False)
            assert p.returncode == 2 and says in p.stderr and not os.path.exists(f"{d}/bad.sqfs"), (args, p.stderr)


def test_single_file_sources_and_progress_on_a_tty():
    with tempdir() as d:
        write(f"{d}/a/report.txt", b"a single file given as SOURCE")
        write(f"{d}/b/data/x", b"x" * 300000)
        # script(1) gives sqar a terminal: the progress bar must appear there and only there.
        p = run(["script", "-qec", f"{SQAR} create {d}/a/report.txt {d}/b {d}/img", "/dev/null"], check=False)
        assert p.returncode == 0, p.stdout
        assert "%" in p.stdout and "entries" in p.stdout, p.stdout
        listing = run(["unsquashfs", "-l", f"{d}/img"]).stdout
        # As with mksquashfs, each of several SOURCEs is an entry of the root under its own name.
        assert "squashfs-root/report.txt" in listing and "squashfs-root/b/data/x" in listing, listing
        quiet = run([SQAR, "create", "-q", f"{d}/b", f"{d}/img2"])
        assert quiet.stdout == "" and quiet.stderr == "", (quiet.stdout, quiet.stderr)
        # On a narrow terminal the status line is cut to fit: a line that wraps cannot be
        # redrawn in place, and each redraw would scroll.
        write(f"{d}/big/text", base64.b64encode(pseudo_random(12 << 20, 5)))
        p = run(["script", "-qec", f"stty cols 40; {SQAR} create -j1 -c xz {d}/big {d}/img3", "/dev/null"], check=False)
        assert p.returncode == 0, p.stdout
        drawn = [part.replace("\x1b[K", "") for part in re.split(r"[\r\n]", p.stdout)]  # text mode: \r may be \n
        bars = [t for t in drawn if t.startswith("[")]
        assert bars, f"no progress bar drawn in a run of seconds: {p.stdout!r}"
        assert all(len(t) <= 39 for t in bars), [t for t in bars if len(t) > 39]


def test_progress_bar_counts_the_second_read_of_files_that_share_a_size():
    """Files of one size are hashed first and read again to be stored if they own their data.
    The bar counted the hashing pass as all of their bytes, so with a duplicate it stood at
    100% from the first second to the last."""
    with tempdir() as d:
        text = base64.b64encode(pseudo_random(9 << 20, 7))
        write(f"{d}/src/a.log", text)
        write(f"{d}/src/a.log.1", text)
        p = run(["script", "-qec", f"{SQAR} create -j1 -c xz {d}/src {d}/img", "/dev/null"], check=False)
        assert p.returncode == 0, p.stdout
        drawn = [part.replace("\x1b[K", "") for part in re.split(r"[\r\n]", p.stdout)]
        percents = [int(m.group(1)) for t in drawn if t.startswith("[") for m in [re.search(r"(\d+)%", t)] if m]
        assert len(percents) >= 4, f"too few progress bars drawn to judge: {p.stdout!r}"
        assert percents == sorted(percents), percents
        # Storing the one copy is most of the run: the bar fills as it goes (it counts bytes as
        # they are read, so it may stand full while the last blocks compress).
        assert percents[0] < 100 and sum(1 for x in percents if x < 100) >= len(percents) / 2, percents
        assert any(40 <= x < 100 for x in percents), percents


LEASE_HOLDER = """
import fcntl, os, signal, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
def release(*_):
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    print("released", flush=True)
signal.signal(signal.SIGIO, release)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print("held", flush=True)
time.sleep(60)
"""


def test_file_under_a_lease_is_waited_for():
    """A file another process holds a lease on (as Samba's oplocks do): source files are opened
    with O_NONBLOCK (a FIFO at a file's name must not hang the build), which makes such an open
    fail with EWOULDBLOCK instead of breaking the lease. sqar opens it again, waiting as cat
    does, and packs it."""
    with tempdir() as d:
        write(f"{d}/src/leased", b"leased content\n")
        holder = subprocess.Popen(["python3", "-c", LEASE_HOLDER, f"{d}/src/leased"], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held", "could not take the lease"
            p = run([SQAR, "create", "-q", f"{d}/src", f"{d}/img"], check=False, timeout=120)
            assert p.returncode == 0, p.stderr
            assert holder.stdout.readline().strip() == "released", "the lease was never broken"
        finally:
            holder.kill()
            holder.wait()
        assert run([SQAR, "cat", f"{d}/img", "leased"]).stdout == "leased content\n"
        log("ok: a leased file is packed once its holder lets go")


if __name__ == "__main__":
    main([test_duplicates_are_never_compressed, test_large_duplicates_are_hashed_not_compressed,
          test_output_is_identical_for_any_thread_count, test_existing_image_is_never_overwritten_without_force,
          test_image_inside_its_source_is_not_packed, test_xattrs_read_the_same_without_listxattrat,
          test_xattrs_of_files_are_read_from_the_open_file, test_file_under_a_lease_is_waited_for,
          test_bad_usage_is_explained, test_unreadable_file_names_path_and_cause,
          test_no_space_left_is_reported_and_cleaned_up, test_no_space_left_without_o_tmpfile,
          test_interrupt_leaves_no_partial_image, test_signals_the_caller_ignores_stay_ignored, test_interrupt_without_o_tmpfile_removes_the_named_image,
          test_file_size_limit_is_an_error_not_a_kill, test_file_size_limit_without_o_tmpfile,
          test_image_mode_follows_umask_and_the_replaced_image,
          test_image_made_by_someone_else_meanwhile_is_not_replaced, test_json_summary_is_valid_for_any_image_name,
          test_json_keys_carry_the_numbers_of_the_text_summary,
          test_times_squashfs_cannot_store_are_clamped_with_a_warning, test_zero_blocks_and_zero_tails_unpack_as_holes,
          test_ranges_in_holes_of_large_sparse_files, test_holes_of_same_size_files_are_not_read_for_dedup,
          test_file_of_millions_of_blocks,
          test_manifest_is_invisible_to_other_readers, test_big_directory_and_file_over_4gib,
          test_one_file_system_and_owner_options, test_single_file_sources_and_progress_on_a_tty,
          test_progress_bar_counts_the_second_read_of_files_that_share_a_size])
