#!/usr/bin/env python3
"""IMAGE '-' (create) and OUT '-' (merge) write the image to standard output: `sqar create dir - |
ssh host 'cat > x.sqfs'`. The image is built in an unnamed file in $TMPDIR and copied out when
complete, so the stream is the same image a file would get (byte for byte, read back by
unsquashfs and the kernel), a failed or interrupted build writes no byte and leaves nothing in
TMPDIR, and a full TMPDIR is an error that names it. Standard output as a pipe, a file, a file
opened for appending, and a terminal (a usage error); --json, which also wants standard output,
is refused beside it."""
import json
import os
import pty
import signal
import subprocess
import time

from sqartest import (SQAR, compare_trees, dir_without_o_tmpfile, kernel_mount, log, main, make_full_tree,
                      need_root, open_files, pseudo_random, run, tempdir, unsquashfs_extract, write)

EPOCH = "4000000000"  # SOURCE_DATE_EPOCH (after every file time): equal image times, so images compare byte for byte


def env_with(tmp):
    return dict(os.environ, TMPDIR=tmp, SOURCE_DATE_EPOCH=EPOCH)


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def create_piped(args, env):
    """`sqar create ARGS | cat`: standard output is a real pipe."""
    p = subprocess.Popen([SQAR, "create", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = p.communicate(timeout=300)
    return p.returncode, out, err.decode()


def tree(d):
    src = make_full_tree(f"{d}/src")
    write(f"{src}/big/data.bin", pseudo_random(3 << 20, 7))
    return src


def test_piped_image_equals_the_file_image():
    with tempdir() as d:
        src = tree(d)
        tmp = f"{d}/tmp"
        os.mkdir(tmp)
        env = env_with(tmp)
        run([SQAR, "create", "-q", src, f"{d}/file.sqfs"], env=env)
        rc, out, err = create_piped([src, "-"], env)
        assert rc == 0, err
        assert out == read_all(f"{d}/file.sqfs"), f"piped image ({len(out)} bytes) differs from the file image"
        assert err.startswith("standard output: "), err  # the summary names where the image went
        assert os.listdir(tmp) == [], f"left in TMPDIR: {os.listdir(tmp)}"
        write(f"{d}/piped.sqfs", out)
        unsquashfs_extract(f"{d}/piped.sqfs", f"{d}/out")
        compare_trees(src, f"{d}/out", "unsquashfs of the piped image")
        run([SQAR, "verify", "-q", f"{d}/piped.sqfs"])
        log(f"ok: the piped image is the file image, {len(out)} bytes")


def test_kernel_mounts_a_redirected_image():
    """Standard output a file (> x.sqfs): copied in the kernel (copy_file_range)."""
    need_root()
    with tempdir() as d:
        src = tree(d)
        img = f"{d}/redirected.sqfs"
        with open(img, "wb") as f:
            run([SQAR, "create", "-q", "-c", "gzip", src, "-"], stdout=f, text=False)
        with kernel_mount(img, f"{d}/mnt") as mnt:
            compare_trees(src, mnt, "the kernel mount of the redirected image")


def test_appending_to_a_file_keeps_its_bytes():
    """>> x: the image follows what the file held (copy_file_range and sendfile refuse O_APPEND;
    read and write take over)."""
    with tempdir() as d:
        src = tree(d)
        env = env_with(f"{d}")
        run([SQAR, "create", "-q", src, f"{d}/file.sqfs"], env=env)
        write(f"{d}/appended", b"HEAD" * 1000)
        with open(f"{d}/appended", "ab") as f:
            run([SQAR, "create", "-q", src, "-"], stdout=f, env=env, text=False)
        got = read_all(f"{d}/appended")
        assert got == b"HEAD" * 1000 + read_all(f"{d}/file.sqfs"), "appended bytes are not the image"


def test_image_inside_a_source_is_not_packed():
    """`sqar create dir - > dir/x.sqfs`: the file standard output fills is skipped, as an IMAGE
    inside a SOURCE is."""
    with tempdir() as d:
        src = tree(d)
        with open(f"{src}/self.sqfs", "wb") as f:
            run([SQAR, "create", "-q", src, "-"], stdout=f, text=False)
        names = run([SQAR, "list", f"{src}/self.sqfs"]).stdout.split("\n")
        assert "self.sqfs" not in names and "big/data.bin" in names, names


def test_failed_build_writes_nothing():
    with tempdir() as d:
        tmp = f"{d}/tmp"
        os.mkdir(tmp)
        rc, out, err = create_piped([f"{d}/missing", "-"], env_with(tmp))
        assert rc == 1 and out == b"" and f"{d}/missing" in err, (rc, len(out), err)
        assert os.listdir(tmp) == [], os.listdir(tmp)
        rc, out, err = create_piped([tree(d), "-"], env_with(f"{d}/no-such-dir"))
        assert rc == 1 and out == b"" and f"{d}/no-such-dir" in err and "TMPDIR" in err, (rc, err)
        log(f"ok: {err.strip()}")


def test_full_tmpdir_is_named():
    need_root()
    with tempdir() as d:
        src = tree(d)
        tmp = f"{d}/small"
        os.mkdir(tmp)
        run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tmp])
        try:
            rc, out, err = create_piped(["--no-dedup", "-c", "lz4", src, "-"], env_with(tmp))
            assert rc == 1 and out == b"", (rc, len(out), err)
            assert "no space left on device" in err and tmp in err and "TMPDIR" in err, err
            assert os.listdir(tmp) == [], os.listdir(tmp)
            log(f"ok: {err.strip()}")
        finally:
            subprocess.run(["umount", tmp])


def spool_open(pid, tmp):
    return any(t.startswith(tmp + "/") for t in open_files(pid))


def interrupted_build(src, tmp, sig):
    """Starts `sqar create SRC -` into a pipe, sends sig once the spool is open: no byte comes
    out and TMPDIR is left empty."""
    p = subprocess.Popen([SQAR, "create", "-q", "-j1", "-c", "xz", "--no-dedup", src, "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_with(tmp))
    deadline = time.monotonic() + 30
    while not spool_open(p.pid, tmp):
        assert p.poll() is None, f"sqar create ended ({p.returncode}) before its spool was seen"
        assert time.monotonic() < deadline, "no spool file in TMPDIR within 30 s"
        time.sleep(0.005)
    visible = [n for n in os.listdir(tmp) if not n.startswith(".fuse_hidden")]
    assert visible == [], f"the spool has a name in {tmp}: {visible}"
    p.send_signal(sig)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == -sig, f"ended with {p.returncode} on signal {sig}"
    assert out == b"", f"{len(out)} bytes written before signal {sig}"
    for _ in range(100):  # FUSE drops a .fuse_hidden file when the kernel releases it, just after
        if not os.listdir(tmp):
            break
        time.sleep(0.05)
    assert os.listdir(tmp) == [], f"{tmp} after signal {sig}: {os.listdir(tmp)}"


def big_tree(d):
    src = f"{d}/src"
    for i in range(40):
        write(f"{src}/f{i}", pseudo_random(1 << 20, i) + bytes(1 << 20))
    return src


def test_signals_leave_nothing():
    with tempdir() as d:
        src = big_tree(d)
        tmp = f"{d}/tmp"
        os.mkdir(tmp)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
            interrupted_build(src, tmp, sig)
        log("ok: SIGTERM, SIGINT and SIGKILL during the build: no byte out, nothing in TMPDIR")


def test_closed_pipe_with_sigpipe_ignored_is_an_error():
    """`trap '' PIPE`: a reader that goes away is a write error naming standard output (exit
    1), not a death by SIGPIPE."""
    with tempdir() as d:
        src = big_tree(d)
        p = subprocess.Popen([SQAR, "create", "-q", src, "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env_with(d), preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN))
        p.stdout.read(10)
        p.stdout.close()
        err = p.communicate(timeout=300)[1].decode()
        assert p.returncode == 1 and "standard output: Broken pipe" in err, (p.returncode, err)


def test_spool_without_o_tmpfile():
    with tempdir() as d:
        src = big_tree(d)
        with dir_without_o_tmpfile(f"{d}/lower", f"{d}/mnt") as tmp:
            interrupted_build(src, tmp, signal.SIGKILL)
            rc, out, err = create_piped([src, "-"], env_with(tmp))
            assert rc == 0 and out[:4] == b"hsqs", (rc, err)
            assert os.listdir(tmp) == [], os.listdir(tmp)


def test_terminal_and_json_are_usage_errors():
    with tempdir() as d:
        src = tree(d)
        master, slave = pty.openpty()
        try:
            for cmd in (["create", src, "-"], ["merge", f"{d}/a.sqfs", "-"]):
                p = run([SQAR, *cmd], stdout=slave, check=False, cwd=d)
                assert p.returncode == 2 and "terminal" in p.stderr, (cmd, p.returncode, p.stderr)
        finally:
            os.close(slave), os.close(master)
        for cmd in (["create", "--json", src, "-"], ["merge", "--json", f"{d}/a.sqfs", "-"]):
            p = run([SQAR, *cmd], check=False, text=False)
            assert p.returncode == 2 and p.stdout == b"" and b"--json" in p.stderr, (cmd, p.stderr)
        assert not os.path.exists(f"{d}/-"), "a file named '-' was written"
        # /dev/stdout into a pipe names no file: the error says what to write instead.
        p = run([SQAR, "create", "-q", src, "/dev/stdout"], check=False, text=False)
        assert p.returncode == 1 and p.stdout == b"" and \
            b"/dev/stdout: a file descriptor's name; write '-' for standard output" in p.stderr, p.stderr


def test_merge_to_standard_output():
    with tempdir() as d:
        src = tree(d)
        env = env_with(d)
        run([SQAR, "create", "-q", f"{src}/dup", f"{d}/a.sqfs"], env=env)
        run([SQAR, "create", "-q", f"{src}/big", f"{d}/b.sqfs"], env=env)
        run([SQAR, "merge", "-q", f"{d}/a.sqfs", f"{d}/b.sqfs", f"{d}/file.sqfs"], env=env)
        p = subprocess.run([SQAR, "merge", "-q", f"{d}/a.sqfs", f"{d}/b.sqfs", "-"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env)
        assert p.returncode == 0 and p.stdout == read_all(f"{d}/file.sqfs"), p.stderr
        # SOURCE_DATE_EPOCH is the merged image's time, as it is a created one's.
        assert json.loads(run([SQAR, "info", "--json", f"{d}/file.sqfs"]).stdout)["mkfs_time"] == int(EPOCH)
        # Appending the result to one of the inputs would copy it onto the file it came from.
        before = read_all(f"{d}/b.sqfs")
        with open(f"{d}/b.sqfs", "ab") as f:
            p = run([SQAR, "merge", "-q", f"{d}/a.sqfs", f"{d}/b.sqfs", "-"], stdout=f, check=False)
        assert p.returncode == 1 and "an input" in p.stderr, p.stderr
        assert read_all(f"{d}/b.sqfs") == before, "the input changed"


if __name__ == "__main__":
    main([test_piped_image_equals_the_file_image, test_kernel_mounts_a_redirected_image,
          test_appending_to_a_file_keeps_its_bytes, test_image_inside_a_source_is_not_packed,
          test_failed_build_writes_nothing, test_full_tmpdir_is_named, test_signals_leave_nothing, test_closed_pipe_with_sigpipe_ignored_is_an_error,
          test_spool_without_o_tmpfile, test_terminal_and_json_are_usage_errors, test_merge_to_standard_output])
