"""IMAGE '-' reads the image from standard input in every read command: `cat img | sqar list -`,
`sqar cat - path < img`, `sqar extract - -C out`, info, verify and diff give what they give on
the file. A pipe is spooled to an unlinked temporary file in $TMPDIR that is gone however sqar
ends (SIGTERM, SIGINT, SIGKILL while it is spooling); `sqar list /dev/stdin` on a pipe says the
pipe cannot seek and points to '-'; a terminal as standard input is a usage error."""
import json
import os
import pty
import signal
import subprocess
import time

from sqartest import (SQAR, compare_trees, dir_without_o_tmpfile, main, make_full_tree, open_files, run,
                      sqar_create, tempdir, write)

READ_COMMANDS = ("list", "cat", "extract", "info", "verify", "diff")


def piped(args, image, env=None, check=True):
    """`cat IMAGE | sqar ARGS...`: standard input is a real pipe, not the file."""
    cat = subprocess.Popen(["cat", image], stdout=subprocess.PIPE)
    try:
        return run([SQAR, *args], stdin=cat.stdout, env=env, check=check, text=False)
    finally:
        cat.stdout.close()
        cat.wait()


def build(d):
    src = make_full_tree(f"{d}/src")
    write(f"{src}/etc/app.conf", b"setting = 1\n")
    img = f"{d}/img.sqfs"
    sqar_create(src, img)
    return src, img


def test_read_commands_take_a_piped_image():
    with tempdir() as d:
        src, img = build(d)
        env = dict(os.environ, TMPDIR=f"{d}/tmp")
        os.mkdir(env["TMPDIR"])
        for args in (["list", "-l"], ["list", "-0"], ["verify", "-q"]):
            want = run([SQAR, *args, img], text=False).stdout
            got = piped([*args, "-"], img, env=env).stdout
            assert got == want, f"sqar {' '.join(args)} -: {got[:300]!r} != {want[:300]!r}"
        info_file = json.loads(run([SQAR, "info", "--json", img]).stdout)
        info_pipe = json.loads(piped(["info", "--json", "-"], img, env=env).stdout)
        info_file.pop("image", None), info_pipe.pop("image", None)
        assert info_pipe == info_file, (info_pipe, info_file)
        got = piped(["cat", "-", "etc/app.conf"], img, env=env).stdout
        assert got == b"setting = 1\n", got
        diff = piped(["diff", "-", src], img, env=env, check=False)
        assert diff.returncode == 0, diff.stderr
        st = os.stat(f"{src}/etc/app.conf")
        write(f"{src}/etc/app.conf", b"setting = 2\n")
        diff = piped(["diff", "-", src], img, env=env, check=False)
        assert diff.returncode == 1 and b"etc/app.conf" in diff.stdout + diff.stderr, diff
        write(f"{src}/etc/app.conf", b"setting = 1\n")
        os.utime(f"{src}/etc/app.conf", ns=(st.st_atime_ns, st.st_mtime_ns))
        piped(["extract", "-q", "-", "-C", f"{d}/out"], img, env=env)
        compare_trees(src, f"{d}/out", "cat img | sqar extract - -C out", owners=os.geteuid() == 0)
        # The tar stream too: image from standard input, archive to standard output.
        tar = piped(["extract", "--tar", "-", "-"], img, env=env).stdout
        listing = run(["tar", "-tf", "-"], input=tar, text=False).stdout.decode()
        assert "etc/app.conf" in listing.splitlines() or "./etc/app.conf" in listing.splitlines(), listing
        assert os.listdir(env["TMPDIR"]) == [], os.listdir(env["TMPDIR"])


def test_redirected_file_is_read_in_place():
    with tempdir() as d:
        _, img = build(d)
        with open(img, "rb") as f:
            got = run([SQAR, "cat", "-", "etc/app.conf"], stdin=f, text=False,
                      env=dict(os.environ, TMPDIR=f"{d}/no-such-dir")).stdout
        assert got == b"setting = 1\n", got  # no temporary file needed: TMPDIR does not exist


def test_dev_stdin_pipe_says_use_dash():
    with tempdir() as d:
        _, img = build(d)
        p = piped(["list", "/dev/stdin"], img, check=False)
        err = p.stderr.decode()
        assert p.returncode == 1, (p.returncode, err)
        assert "pipe" in err and "cannot seek" in err and "'-'" in err and "too small" not in err, err


def test_terminal_on_stdin_is_a_usage_error():
    master, slave = pty.openpty()
    try:
        p = run([SQAR, "list", "-"], stdin=slave, check=False)
    finally:
        os.close(slave), os.close(master)
    assert p.returncode == 2 and "terminal" in p.stderr, (p.returncode, p.stderr)


def test_unusable_tmpdir_is_named():
    with tempdir() as d:
        _, img = build(d)
        p = piped(["list", "-"], img, env=dict(os.environ, TMPDIR=f"{d}/missing"), check=False)
        err = p.stderr.decode()
        assert p.returncode == 1 and f"{d}/missing" in err and "TMPDIR" in err, (p.returncode, err)


def spool_files(pid, tmp):
    """The open files of PID that live (or lived) in directory tmp."""
    return [t for t in open_files(pid) if t.startswith(tmp + "/")]


def interrupted_while_spooling(img, tmp, sig):
    """Feeds half of IMAGE to `sqar list -`, waits until the spool file is open, sends sig."""
    env = dict(os.environ, TMPDIR=tmp)
    p = subprocess.Popen([SQAR, "list", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env)
    data = open(img, "rb").read()
    p.stdin.write(data[: len(data) // 2])
    p.stdin.flush()
    for _ in range(500):
        spools = spool_files(p.pid, tmp)
        if spools and all(s.endswith(" (deleted)") for s in spools):
            break
        time.sleep(0.01)
    else:
        p.kill()
        raise AssertionError(f"sqar list - opened no unnamed file in TMPDIR {tmp}: {spool_files(p.pid, tmp)}")
    # On FUSE (the O_TMPFILE fallback test) an open file that was unlinked shows as
    # .fuse_hidden* until it is closed: unlinked all the same.
    visible = [n for n in os.listdir(tmp) if not n.startswith(".fuse_hidden")]
    assert visible == [], f"spool file visible in {tmp}: {visible}"
    p.send_signal(sig)
    p.stdin.close()
    p.wait(timeout=30)
    p.stderr.close()
    assert p.returncode == -sig, f"sqar list - ended with {p.returncode} on signal {sig}"
    for _ in range(100):  # FUSE drops a .fuse_hidden file when the kernel releases it, just after
        if not os.listdir(tmp):
            break
        time.sleep(0.05)
    assert os.listdir(tmp) == [], f"{tmp} after signal {sig}: {os.listdir(tmp)}"


def test_spool_file_is_unnamed_and_gone_after_signals():
    with tempdir() as d:
        _, img = build(d)
        tmp = f"{d}/tmp"
        os.mkdir(tmp)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
            interrupted_while_spooling(img, tmp, sig)


def test_spool_without_o_tmpfile():
    with tempdir() as d:
        _, img = build(d)
        with dir_without_o_tmpfile(f"{d}/lower", f"{d}/mnt") as tmp:
            interrupted_while_spooling(img, tmp, signal.SIGTERM)
            got = piped(["cat", "-", "etc/app.conf"], img, env=dict(os.environ, TMPDIR=tmp)).stdout
            assert got == b"setting = 1\n", got
            assert os.listdir(tmp) == [], os.listdir(tmp)


def test_help_says_where_the_spool_goes():
    for cmd in READ_COMMANDS:
        out = run([SQAR, cmd, "--help"]).stdout
        assert "IMAGE '-'" in out and "$TMPDIR" in out, f"sqar {cmd} --help:\n{out}"


if __name__ == "__main__":
    main([test_read_commands_take_a_piped_image, test_redirected_file_is_read_in_place,
          test_dev_stdin_pipe_says_use_dash, test_terminal_on_stdin_is_a_usage_error, test_unusable_tmpdir_is_named,
          test_spool_file_is_unnamed_and_gone_after_signals, test_spool_without_o_tmpfile,
          test_help_says_where_the_spool_goes])
