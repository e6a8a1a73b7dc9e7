"""The README's usage examples run in order, as written, on a scratch tree.

The commands are the indented code blocks of README.md's "## Usage" section (up to "### Exit
status"), one command a line; lines that are only a comment are skipped. They run one by one,
in README order, under `bash -c` with `set -eo pipefail`, each of them must exit 0, and a few
results are checked after the command that makes them. So that they run anywhere:

- absolute paths below /var/log, /usr/ports, /srv, /backup, /etc, /home, /tmp and /mnt are
  taken below a scratch root instead, which holds a small tree of each (logs with ERROR lines
  and an archive/ of rotated copies, a ports tree with .git and .o files, media with a
  duplicate, a database dump, an etc, a home with notes.txt) and the mount points;
- `ssh host ` is dropped: the remote host is this machine;
- relative paths (logs.sqfs, src/) are in a scratch working directory holding src/;
- `sqar` and `sqarfs` are the binaries under test, first in PATH (mount.fuse3 finds sqarfs
  there for the fstab lines).

The "Mounting" and "fstab" blocks need root, /dev/fuse and a kernel that mounts the image:
without them that test skips, saying why. Each fstab line is mounted from an alternate fstab
(`mount -T FILE MOUNTPOINT`), its image being a copy of the logs.sqfs the examples made."""
import os
import re
import shutil
import subprocess

from sqartest import (SQAR, SQARFS, compare_trees, kernel_supports, log, main, pseudo_random, run, skip, tempdir,
                      unmount_fuse, write)

README = os.path.join(os.environ.get("SQAR_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                      "README.md")
SCRATCH_TOPS = ("var/log", "usr/ports", "srv", "backup", "etc", "home", "tmp", "mnt", "data")
MOUNT_LABELS = ("Mounting", "fstab")


def usage_blocks():
    """[(label, [lines])] of the Usage section: label is the bold text the block follows."""
    text = open(README).read()
    start, end = text.index("\n## Usage\n"), text.index("\n### Exit status")
    blocks, label, current = [], "", None
    for line in text[start:end].splitlines():
        if line.startswith("    "):
            if current is None:
                current = (label, [])
                blocks.append(current)
            current[1].append(line[4:])
            continue
        if line.strip():
            current = None
            m = re.match(r"\*\*([^*]+)\*\*", line)
            if m:
                label = m.group(1)
        elif current is not None and not current[1]:
            current = None
    assert blocks, "no indented code block in README.md's Usage section"
    return [(label, [x for x in lines if x.strip() and not x.lstrip().startswith("#")]) for label, lines in blocks]


def substitute(line, root):
    tops = "|".join(re.escape(t) for t in SCRATCH_TOPS)
    line = re.sub(rf"(?<![\w.~/-])/(?={tops}(?:[/\s'\"]|$))", root + "/", line)
    return line.replace("ssh host ", "")


def build_scratch(root):
    logs = f"{root}/var/log"
    app = b"".join(b"%06d INFO request served\n" % i if i % 50 else b"%06d ERROR upstream timed out\n" % i
                   for i in range(4000))
    write(f"{logs}/app.log", app)
    write(f"{logs}/archive/app.log.1", app[: len(app) // 2])
    write(f"{logs}/archive/syslog.1", b"Nov 24 kernel: booted\n" * 500)
    write(f"{logs}/syslog", b"Nov 25 kernel: booted\n" * 700)
    write(f"{logs}/apt/history.log", b"Start-Date: 2026-11-25\n" * 40)
    ports = f"{root}/usr/ports"
    write(f"{ports}/www/nginx/Makefile", b"PORTNAME= nginx\n")
    write(f"{ports}/www/nginx/work/main.o", pseudo_random(5000, 1))
    write(f"{ports}/lang/python/Makefile", b"PORTNAME= python\n")
    write(f"{ports}/.git/config", b"[core]\n")
    media = pseudo_random(300_000, 2)
    write(f"{root}/srv/media/film.mkv", media)
    write(f"{root}/srv/media/copy-of-film.mkv", media)
    write(f"{root}/backup/db/dump.sql", b"INSERT INTO t VALUES (1, 'row');\n" * 3000)
    write(f"{root}/etc/hostname", b"scratch\n")
    write(f"{root}/etc/app/app.conf", b"level = 3\n")
    write(f"{root}/home/me/notes.txt", b"remember the milk\n")
    write(f"{root}/work/src/main.c", b"int main(void) { return 0; }\n")
    write(f"{root}/work/src/doc/README", b"release notes\n" * 100)
    # A release tarball as projects ship them: everything under its release-1.2/ directory.
    run(["tar", "--zstd", "-C", f"{root}/work/src", "--transform", r"s,^\.,release-1.2,", "-cf",
         f"{root}/work/release-1.2.tar.zst", "."])
    write(f"{logs}/rotated/2026-11-24/app.log.2", app[: len(app) // 3])
    write(f"{logs}/rotated/2026-11-25/app.log.3", app[: len(app) // 4])
    write(f"{root}/work/fixed/app.log.1", b"repaired\n")
    shared = pseudo_random(200_000, 3)
    for shard in ("a", "b", "c"):
        write(f"{root}/data/tree/{shard}/own-{shard}.dat", pseudo_random(50_000, ord(shard)))
    write(f"{root}/data/tree/a/shared.dat", shared)
    write(f"{root}/data/tree/README", b"the root's own file: in the root shard only\n")
    write(f"{root}/data/tree/c/copy-of-shared.dat", shared)
    for d in ("tmp", "mnt/logs", "mnt/logs2", "srv/images"):
        os.makedirs(f"{root}/{d}", exist_ok=True)


def listing(image):
    return run([SQAR, "list", image]).stdout.splitlines()


class Examples:
    """The scratch root shared by both tests, and the checks tied to README commands."""
    root = None

    def __init__(self):
        self.env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(os.path.abspath(SQAR)),
                                                          os.path.dirname(os.path.abspath(SQARFS)),
                                                          os.environ.get("PATH", "")]))

    def run_line(self, line):
        cmd = substitute(line, self.root)
        log(f"$ {cmd}")
        p = subprocess.run(["bash", "-c", "set -eo pipefail; " + cmd], cwd=f"{self.root}/work", env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        if p.returncode != 0:
            raise AssertionError(f"README example failed (exit {p.returncode}): {line}\nran: {cmd}\n"
                                 f"stdout: {p.stdout[-2000:]!r}\nstderr: {p.stderr[-2000:]!r}")
        return p


def check_ports(r, out):
    paths = listing(f"{r}/work/ports.sqfs")
    assert "www/nginx/Makefile" in paths, paths
    assert not [p for p in paths if p.endswith(".o") or ".git" in p], paths


def check_config(r, out):
    assert [p for p in listing(f"{r}/work/config.sqfs") if "/" not in p] == ["etc", "log", "notes.txt"]


def check_grep(r, out):
    want = [x for x in open(f"{r}/var/log/app.log", "rb").read().splitlines(True) if b"ERROR" in x]
    assert out.splitlines(True) == want and want, out[:200]


def check_restore(r, out):
    compare_trees(f"{r}/var/log/archive", f"{r}/tmp/restore/archive", "extract 'archive/*'")
    assert sorted(os.listdir(f"{r}/tmp/restore")) == ["archive"], os.listdir(f"{r}/tmp/restore")


def check_tar_stream(r, out):
    for name in ("app.log", "apt/history.log", "archive/app.log.1"):
        assert open(f"{r}/srv/{name}", "rb").read() == open(f"{r}/var/log/{name}", "rb").read(), name


def extracted(r, image):
    dest = f"{r}/tmp/check-{os.path.basename(image)}"
    shutil.rmtree(dest, ignore_errors=True)
    run([SQAR, "extract", "-q", f"{r}/work/{image}", "-C", dest])
    return dest


def check_from_tar(r, out):
    got = extracted(r, "release-1.2.sqfs")
    assert os.listdir(got) == ["release-1.2"], os.listdir(got)
    compare_trees(f"{r}/work/src", f"{got}/release-1.2", "create --tar of the release tarball")


def check_stripped(r, out):
    compare_trees(f"{r}/work/src", f"{r}/tmp/release", "extract --strip-components 1")


def check_rebuilt_when_changed(r, out):
    run([SQAR, "diff", "-q", f"{r}/work/logs.sqfs", f"{r}/var/log"])  # exit 0: the image is current


def check_append(r, out):
    got = extracted(r, "archive.sqfs")
    assert sorted(os.listdir(got)) == ["app.log.1", "app.log.2", "syslog.1"], os.listdir(got)
    assert open(f"{got}/app.log.1", "rb").read() == b"repaired\n"
    assert open(f"{got}/app.log.2", "rb").read() == open(f"{r}/var/log/rotated/2026-11-24/app.log.2", "rb").read()
    assert open(f"{got}/syslog.1", "rb").read() == open(f"{r}/var/log/archive/syslog.1", "rb").read()


def check_append_tar(r, out):
    got = extracted(r, "archive.sqfs")
    assert sorted(os.listdir(got)) == ["2026-11-25", "app.log.1", "app.log.2", "syslog.1"], os.listdir(got)
    compare_trees(f"{r}/var/log/rotated/2026-11-25", f"{got}/2026-11-25", "append --tar of a tar stream")


def check_merge(r, out):
    compare_trees(f"{r}/data/tree", extracted(r, "all.sqfs"), "merge of the shards")


def check_merge_recoded(r, out):
    image = f"{r}/work/all-gzip.sqfs"
    info = run(["unsquashfs", "-s", image]).stdout
    assert "Compression gzip" in info and "Block size 1048576" in info, info
    compare_trees(f"{r}/data/tree", extracted(r, "all-gzip.sqfs"), "merge of the shards recoded to gzip",
                  holes=1 << 20)


def check_logs_mount(r, out):
    compare_trees(f"{r}/var/log", f"{r}/mnt/logs", "the README's mount")


# README command (as written) -> check of what it made. Every key must be a README command,
# so that a renamed example cannot silently lose its check.
CHECKS = {
    "sqar create --exclude .git/ --exclude '*.o' --all-root /usr/ports ports.sqfs": check_ports,
    "sqar create /etc /var/log /home/me/notes.txt config.sqfs": check_config,
    "sqar cat logs.sqfs app.log | grep ERROR": check_grep,
    "sqar extract logs.sqfs -C /tmp/restore 'archive/*'": check_restore,
    "sqar extract --tar - logs.sqfs | ssh host tar -xpf - -C /srv": check_tar_stream,
    "sqar create --tar release-1.2.tar.zst release-1.2.sqfs": check_from_tar,
    "sqar extract --strip-components 1 release-1.2.sqfs -C /tmp/release": check_stripped,
    "sqar diff -q logs.sqfs /var/log || sqar create -f --reuse logs.sqfs /var/log logs.sqfs": check_rebuilt_when_changed,
    "sqar append --replace archive.sqfs fixed/app.log.1": check_append,
    "ssh host tar -C /var/log/rotated -cf - 2026-11-25 | sqar append --tar - archive.sqfs": check_append_tar,
    "sqar merge shard-*.sqfs all.sqfs": check_merge,
    "sqar merge -c gzip -b 1M shard-*.sqfs all-gzip.sqfs": check_merge_recoded,
    "sqarfs logs.sqfs /mnt/logs": check_logs_mount,
    "sqarfs -o cache=512M,allow_other logs.sqfs /mnt/logs": check_logs_mount,
    "mount -t squashfs -o loop,ro logs.sqfs /mnt/logs": check_logs_mount,
}


def command_of(line):
    return line.split("  #")[0].strip()


def run_block_lines(ex, lines, used):
    for line in lines:
        p = ex.run_line(line)
        check = CHECKS.get(command_of(line))
        if check:
            check(ex.root, p.stdout)
            used.add(command_of(line))


def test_usage_examples_run_in_order():
    ex = Examples()
    build_scratch(ex.root)
    blocks = usage_blocks()
    used = set()
    for label, lines in blocks:
        if not label.startswith(MOUNT_LABELS):
            run_block_lines(ex, lines, used)
    readme_commands = {command_of(x) for _, lines in blocks for x in lines}
    missing = [c for c in CHECKS if c not in readme_commands]
    assert not missing, f"checked commands no longer in the README: {missing}"
    assert used == {c for c in CHECKS if not c.startswith(("sqarfs", "mount"))}, used
    assert os.path.exists(f"{ex.root}/work/logs.sqfs"), "the examples made no logs.sqfs"


def mounted(path):
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == real for line in f)


def test_mount_examples_run_in_order():
    if os.geteuid() != 0:
        skip("the Mounting and fstab examples need root")
    if not os.path.exists("/dev/fuse"):
        skip("no /dev/fuse for the sqarfs examples")
    ex = Examples()
    image = f"{ex.root}/work/logs.sqfs"
    if not os.path.exists(image):
        raise AssertionError("logs.sqfs is missing: the usage examples did not run")
    codec = run([SQAR, "info", "--json", image]).stdout
    codec = re.search(r'"compressor":\s*"(\w+)"', codec).group(1)
    if not kernel_supports(codec):
        skip(f"this kernel cannot mount {codec} images (the Mounting block mounts logs.sqfs with it)")
    blocks = dict(usage_blocks())
    used, linked = set(), []
    try:
        run_block_lines(ex, blocks["Mounting:"] if "Mounting:" in blocks else blocks["Mounting"], used)
        assert not mounted(f"{ex.root}/mnt/logs"), "the Mounting examples leave /mnt/logs mounted"
        shutil.copy(image, f"{ex.root}/srv/images/logs.sqfs")
        # util-linux mount(8) drops PATH, so mount.fuse3's shell finds sqarfs only in its default
        # path, where `cmake --install` puts it: link ours there while the fstab lines run.
        system_sqarfs = "/usr/local/bin/sqarfs"
        if not os.path.lexists(system_sqarfs) and os.path.isdir("/usr/local/bin"):
            os.symlink(os.path.abspath(SQARFS), system_sqarfs)
            linked.append(system_sqarfs)
        log(f"fstab lines mount with {os.path.realpath(system_sqarfs)}")
        fstab_lines = next(lines for label, lines in blocks.items() if label.startswith("fstab"))
        assert fstab_lines, "no fstab lines in the README"
        for line in fstab_lines:
            fields = substitute(line, ex.root).split()
            mnt = fields[1]
            write(f"{ex.root}/fstab", (" ".join(fields) + "\n").encode())
            log(f"fstab: {line}")
            p = run(["mount", "-T", f"{ex.root}/fstab", mnt], env=ex.env, check=False)
            assert p.returncode == 0, f"mount -T of README fstab line {line!r} failed: {p.stderr}"
            try:
                compare_trees(f"{ex.root}/var/log", mnt, f"fstab line {line!r}")
                assert os.statvfs(mnt).f_flag & os.ST_RDONLY, f"{line!r} mounted read-write"
            finally:
                subprocess.run(["umount", mnt])
        assert used == {c for c in CHECKS if c.startswith(("sqarfs", "mount"))}, used
    finally:
        for link in linked:
            os.unlink(link)
        for m in ("mnt/logs", "mnt/logs", "mnt/logs2"):
            if mounted(f"{ex.root}/{m}"):
                unmount_fuse(f"{ex.root}/{m}")
                subprocess.run(["umount", "-l", f"{ex.root}/{m}"], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    with tempdir("sqar-readme-") as scratch:
        Examples.root = scratch
        main([test_usage_examples_run_in_order, test_mount_examples_run_in_order])
