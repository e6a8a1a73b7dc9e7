"""A root `sqar extract` must never be raced into changing anything outside its target.

The image holds pub/ (mode 0777) with many fifos of mode 0666. While root extracts it, an
unprivileged process (a forked child that drops to nobody) keeps renaming symlinks to a
root-owned 0600 file over the names in the target's pub/. If pub/ is writable by others while
its entries get their metadata, and a metadata call follows a symlink, the victim becomes 0666.
The fixed extract makes pub/ 0700 until its content is done, so the attacker cannot touch it,
and sets metadata through descriptors that cannot be symlinks; strace shows every directory is
made 0700 and opened to get its final mode."""
import os
import re
import signal
import stat
import time

from sqartest import SQAR, log, main, need_root, need_tool, run, sqar_create, tempdir

FIFOS = 3000
RUNS = 3
NOBODY = 65534


def attacker(pub, victim, report):
    """Child: as nobody, swap symlinks to victim over every name seen in pub; never returns."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    listed = swapped = 0
    n = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            names = os.listdir(pub)
        except OSError:
            continue
        listed += 1
        for name in names:
            tmp = f"{pub}/.swap{n}"
            n += 1
            try:
                os.symlink(victim, tmp)
                os.rename(tmp, f"{pub}/{name}")
                swapped += 1
            except OSError:
                pass
            with open(report, "w") as f:
                f.write(f"{listed} {swapped}\n")
    os._exit(0)


def test_fifo_swap_race():
    need_root()
    with tempdir() as d:
        os.chmod(d, 0o755)
        src = f"{d}/src"
        os.makedirs(f"{src}/pub")
        for i in range(FIFOS):
            os.mkfifo(f"{src}/pub/f{i:05d}")
            os.chmod(f"{src}/pub/f{i:05d}", 0o666)
        os.chmod(f"{src}/pub", 0o777)
        img = f"{d}/pub.sqfs"
        sqar_create(src, img)
        victim = f"{d}/victim"
        with open(victim, "w") as f:
            f.write("root's secret\n")
        os.chmod(victim, 0o600)
        report = f"{d}/attack-report"
        for k in range(RUNS):
            out = f"{d}/out{k}"
            os.makedirs(out)
            os.chmod(out, 0o755)
            open(report, "w").close()
            os.chmod(report, 0o666)
            pid = os.fork()
            if pid == 0:
                try:
                    attacker(f"{out}/pub", victim, report)
                finally:
                    os._exit(1)
            try:
                p = run([SQAR, "extract", "-q", "-j1", img, "-C", out], check=False)
            finally:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            mode = stat.S_IMODE(os.stat(victim).st_mode)
            if mode != 0o600:
                raise AssertionError(f"run {k}: the victim outside the target became {mode:o} (exit {p.returncode})")
            with open(report) as f:
                counts = f.read().split()
            # The attacker also runs for the moment between pub/ getting 0777 at the very end and
            # its kill, so entries it swapped then are expected; during the run it could not.
            if p.returncode != 0:
                raise AssertionError(f"run {k}: extract failed (the attacker got into pub/): {p.stderr}")
            pub_mode = stat.S_IMODE(os.lstat(f"{out}/pub").st_mode)
            if pub_mode != 0o777:
                raise AssertionError(f"run {k}: pub/ ended as {pub_mode:o}, expected 777")
            log(f"ok: run {k}: victim still 0600, extract exited 0 (attacker listed/swapped: {counts})")


def test_directories_made_restrictive():
    """Every directory is made 0700; its final mode comes later, through its own descriptor."""
    need_root()
    need_tool("strace")
    with tempdir() as d:
        src = f"{d}/src"
        for sub, mode in (("pub", 0o777), ("pub/deep", 0o775), ("plain", 0o755), ("sticky", 0o1777)):
            os.makedirs(f"{src}/{sub}")
            open(f"{src}/{sub}/file", "w").close()
            os.mkfifo(f"{src}/{sub}/fifo")
            os.chmod(f"{src}/{sub}", mode)
        img = f"{d}/img.sqfs"
        sqar_create(src, img)
        # LeakSanitizer cannot run under ptrace: under strace an ASan build checks all but leaks.
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        for jobs in ("1", "2"):
            out = f"{d}/out{jobs}"
            p = run(["strace", "-f", "-qq", "-e", "trace=mkdir,mkdirat,chmod,fchmodat,fchmod", SQAR, "extract", "-q",
                     "-j", jobs, img, "-C", out], env=env)
            # With two threads strace may split a call: 'mkdirat(5, "deep", 0700 <unfinished ...>'.
            mkdirs = re.findall(r'mkdirat\(\d+, "([^"]+)", (\d+)(?:\)| <unfinished)', p.stderr)
            if sorted(n for n, _ in mkdirs) != ["deep", "plain", "pub", "sticky"]:
                raise AssertionError(f"-j{jobs}: unexpected mkdirat calls: {mkdirs}\n{p.stderr}")
            loose = [(n, m) for n, m in mkdirs if m != "0700"]
            if loose:
                raise AssertionError(f"-j{jobs}: directories created with a mode others can use: {loose}")
            for name in ("fifo",):
                for sub in ("pub", "plain"):
                    if stat.S_IMODE(os.lstat(f"{out}/{sub}/{name}").st_mode) != stat.S_IMODE(os.lstat(f"{src}/{sub}/{name}").st_mode):
                        raise AssertionError(f"-j{jobs}: {sub}/{name} has the wrong mode")
            for sub, mode in (("pub", 0o777), ("pub/deep", 0o775), ("plain", 0o755), ("sticky", 0o1777)):
                got = stat.S_IMODE(os.lstat(f"{out}/{sub}").st_mode)
                if got != mode:
                    raise AssertionError(f"-j{jobs}: {sub} ended as {got:o}, expected {mode:o}")
            log(f"ok: -j{jobs}: {len(mkdirs)} directories made 0700, final modes applied afterwards")


if __name__ == "__main__":
    main([test_fifo_swap_race, test_directories_made_restrictive])
