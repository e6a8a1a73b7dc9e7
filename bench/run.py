#!/usr/bin/env python3
"""sqar benchmark: sqar against the SquashFS and tar tools installed from Debian.

    python3 bench/run.py [--quick|--full] [--sets log,movie,ports] [--runs N]

What it does, per data set (generated once by ../shared/bench/gen_data.py, cached in bench/data/):
  create   sqar create, mksquashfs, gensquashfs, tar+zstd (-T0) and tar+pigz at equal compressor,
           level and block size (zstd-15, zstd-3, gzip-9; 128 KiB blocks), on all cores;
  extract  sqar extract vs unsquashfs -d (same image) vs tar -x;
  list     sqar list -l vs unsquashfs -lls and sqar info vs unsquashfs -s (same image: metadata only);
  mount    kernel loop mount vs squashfuse vs squashfuse_ll vs sqarfs on one image: mount time,
           reading every file, random 4 KiB reads with 4 threads, walk + lstat of every entry.
Every tool runs once as a warm-up whose output is checked (round trip against the source tree)
before its timed runs count; timed runs are interleaved round-robin so drift hits all tools alike.
Wall time, user+sys CPU and peak RSS come from os.wait4()'s rusage of the child (which includes
the child's own children, e.g. tar's zstd). The report gives medians and sqar/peer ratios and is
written to bench/results/YYYY-MM-DD-<mode>.md.

It is a benchmark, not a test: it never fails on speed, and a missing or failing tool only turns
its column into "n/a (...)". Python 3 standard library only; two small C helpers (codecspeed.c,
randread.c) are built on the fly with cc when it exists.
"""
import argparse
import datetime
import hashlib
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
DATA_DIR = os.path.join(BENCH_DIR, "data")
WORK_DIR = os.path.join(BENCH_DIR, "work")
RESULTS_DIR = os.path.join(BENCH_DIR, "results")
BLOCK_SIZE = 131072

# Compressor configurations compared at equal settings: (label, codec, level).
CONFIGS = [("zstd-15", "zstd", 15), ("zstd-3", "zstd", 3), ("gzip-9", "gzip", 9)]
# The configuration whose images the extract and mount benchmarks read.
READ_CONFIG = "zstd-3"


def selected_configs():
    """The create configurations this run measures (--configs; all by default)."""
    wanted = ARGS.configs if ARGS and ARGS.configs else [c[0] for c in CONFIGS]
    return [c for c in CONFIGS if c[0] in wanted]

MODES = {
    # scale: gen_data.py --scale; runs: timed runs per tool; rand_seconds: duration of one
    # random-read run; timeout: per command.
    "quick": {"scale": 0.05, "runs": 3, "rand_seconds": 2.0, "timeout": 600},
    "full": {"scale": 1.0, "runs": 5, "rand_seconds": 5.0, "timeout": 3600},
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class StepFailed(Exception):
    """A tool failed or produced wrong output; the report shows the reason instead of numbers."""


# ---------------------------------------------------------------------------------------------
# Running and measuring commands

class Measurement:
    def __init__(self, wall, cpu, rss_kib, stdout=""):
        self.wall, self.cpu, self.rss_kib, self.stdout = wall, cpu, rss_kib, stdout


GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def run_measured(cmd, timeout, cwd=None, env=None):
    """Runs cmd, returns its Measurement; raises StepFailed on non-zero exit or timeout.

    os.wait4 gives wall time and the user+sys CPU of the child and its reaped descendants (tar's
    zstd included). Peak RSS comes from GNU time's %M when installed: a child forked from this
    Python process starts with Python's own high-water RSS (Linux keeps it across exec), so
    ru_maxrss seen here would never drop below ~30 MiB; GNU time is small, so its child is not
    inflated."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r") as rss_file:
        full = ([GNU_TIME, "-f", "%M", "-o", rss_file.name] if GNU_TIME else []) + list(cmd)
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(full, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
        except OSError as e:
            raise StepFailed(f"cannot run {cmd[0]}: {e.strerror}")
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9
                raise StepFailed(f"timed out after {timeout} s")
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        rss = ru.ru_maxrss
        if GNU_TIME:
            lines = rss_file.read().split()
            if lines and lines[-1].isdigit():
                rss = int(lines[-1])
    if proc.returncode == 127 and GNU_TIME and not os.path.exists(cmd[0]) and not shutil.which(cmd[0]):
        raise StepFailed(f"cannot run {cmd[0]}: not found")
    if proc.returncode != 0:
        lines = [l for l in stderr.strip().splitlines() if l.strip()] or [f"exit code {proc.returncode}"]
        raise StepFailed(f"exit {proc.returncode}: {lines[-1][:160]}")
    return Measurement(wall, ru.ru_utime + ru.ru_stime, rss, stdout)


def run_quiet(cmd, timeout=600, check=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       timeout=timeout)
    if check and r.returncode != 0:
        lines = r.stdout.decode(errors="replace").strip().splitlines() or [f"exit code {r.returncode}"]
        raise StepFailed(f"{os.path.basename(cmd[0])} failed: {lines[-1][:160]}")
    return r.stdout.decode(errors="replace")


def drop_caches():
    """Writes dirty pages, then drops the page, dentry and inode caches (root only)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def cpu_times():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields), fields[3] + fields[4]  # total, idle + iowait


def wait_idle(limit):
    """Waits until the CPUs have been idle (under 10% busy) for one second, at most limit seconds;
    returns False on timeout. On a machine shared with other work, a compile starting during a
    15 ms operation moves its result by half; the wait only helps on a machine whose other load
    comes and goes, and every reader gets it alike."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        a = cpu_times()
        time.sleep(1.0)
        b = cpu_times()
        if 1 - (b[1] - a[1]) / max(1, b[0] - a[0]) < 0.10:
            return True
    return False


def rmtree(path):
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=False)


# ---------------------------------------------------------------------------------------------
# Tools

def tool_version(cmd):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in r.stdout.decode(errors="replace").splitlines():
        line = line.strip().strip("*").strip()
        if line:
            return line
    return None


class Tools:
    def __init__(self, args):
        self.sqar = args.sqar or os.path.join(REPO_DIR, "build", "tools", "sqar")
        self.sqarfs = args.sqarfs or os.path.join(REPO_DIR, "build", "fuse", "sqarfs")
        if not os.access(self.sqar, os.X_OK):
            self.sqar = shutil.which("sqar")
        if not os.access(self.sqarfs, os.X_OK):
            self.sqarfs = shutil.which("sqarfs")
        self.paths = {name: shutil.which(name) for name in
                      ("mksquashfs", "unsquashfs", "gensquashfs", "tar", "zstd", "pigz", "squashfuse",
                       "squashfuse_ll", "fusermount3", "fusermount", "mount", "umount", "cc")}
        self.paths["sqar"] = self.sqar
        self.paths["sqarfs"] = self.sqarfs

    def have(self, name):
        return bool(self.paths.get(name))

    def versions(self):
        cmds = {
            "sqar": [self.sqar, "--version"] if self.sqar else None,
            "mksquashfs": ["mksquashfs", "-version"], "unsquashfs": ["unsquashfs", "-version"],
            "gensquashfs": ["gensquashfs", "--version"], "tar": ["tar", "--version"],
            "zstd": ["zstd", "--version"], "pigz": ["pigz", "--version"],
            "squashfuse": ["squashfuse", "--version"], "squashfuse_ll": ["squashfuse_ll", "--version"],
        }
        out = {}
        for name, cmd in cmds.items():
            if cmd and self.have(name):
                out[name] = tool_version(cmd) or "installed (version unknown)"
            else:
                out[name] = "not installed"
        if self.sqarfs:
            out["sqarfs"] = self.sqarfs
        else:
            out["sqarfs"] = "not installed"
        return out


def build_helper(name, libs, tools):
    """Compiles bench/NAME.c into bench/work/NAME; returns the binary or None."""
    if not tools.have("cc"):
        return None
    src = os.path.join(BENCH_DIR, name + ".c")
    exe = os.path.join(WORK_DIR, name)
    if os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(src):
        return exe
    r = subprocess.run(["cc", "-O2", "-pthread", "-o", exe, src] + libs, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode != 0:
        log(f"note: could not build {name}.c: {r.stdout.decode(errors='replace').strip()[:300]}")
        return None
    return exe


# ---------------------------------------------------------------------------------------------
# Data sets and their reference description (for the round-trip checks)

def find_gen_data(args):
    for cand in (args.gen_data, os.path.join(REPO_DIR, "..", "shared", "bench", "gen_data.py"),
                 os.path.join(BENCH_DIR, "gen_data.py")):
        if cand and os.path.isfile(cand):
            return os.path.abspath(cand)
    sys.exit("bench: gen_data.py not found (looked in ../shared/bench/ and bench/); pass --gen-data PATH")


def ensure_data(name, scale, gen_data):
    """Returns the directory of data set NAME at SCALE, generating it on first use."""
    root = os.path.join(DATA_DIR, f"scale-{scale:g}")
    path = os.path.join(root, name)
    stamp = os.path.join(root, f".{name}.complete")
    if os.path.exists(stamp) and os.path.isdir(path):
        return path
    log(f"generating data set '{name}' at scale {scale:g} in {root} ...")
    rmtree(path)
    os.makedirs(root, exist_ok=True)
    subprocess.run([sys.executable, gen_data, root, "--scale", str(scale), "--only", name], check=True)
    open(stamp, "w").close()
    return path


def hash_file(path):
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb", buffering=0) as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()


def describe_tree(root):
    """{relative path: (kind, permission bits, size, content hash or link target)} for every entry."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            perm = st.st_mode & 0o7777
            if os.path.islink(p):
                out[rel] = ("link", 0, 0, os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir", perm, 0, "")
            elif os.path.isfile(p):
                out[rel] = ("file", perm, st.st_size, hash_file(p))
            else:
                out[rel] = ("other", perm, 0, str(st.st_mode >> 12))
    return out


def compare_trees(reference, root):
    """Raises StepFailed naming the first difference between reference and the tree at root."""
    got = describe_tree(root)
    if got != reference:
        missing = sorted(set(reference) - set(got))
        extra = sorted(set(got) - set(reference))
        if missing:
            raise StepFailed(f"wrong output: {len(missing)} entries missing, e.g. {missing[0]}")
        if extra:
            raise StepFailed(f"wrong output: {len(extra)} unexpected entries, e.g. {extra[0]}")
        for k in sorted(reference):
            if reference[k] != got[k]:
                raise StepFailed(f"wrong output: {k} differs ({reference[k][:3]} vs {got[k][:3]})")


class DataSet:
    def __init__(self, name, path):
        self.name, self.path = name, path
        log(f"[{name}] describing source tree ...")
        self.reference = describe_tree(path)
        files = [(k, v) for k, v in self.reference.items() if v[0] == "file"]
        self.files = len(files)
        self.entries = len(self.reference)
        self.total_bytes = sum(v[2] for _, v in files)
        uniq = {}
        for k, v in sorted(files):
            uniq.setdefault(v[3], (k, v[2]))
        self.unique = sorted(uniq.values())        # (relative path, size) of one copy per content
        self.unique_bytes = sum(s for _, s in self.unique)

    def sample(self, out_path, budget):
        """Writes up to budget bytes taken evenly from the unique files: the codec-speed sample."""
        per_file = max(4096, budget // max(1, len(self.unique)))
        written = 0
        with open(out_path, "wb") as out:
            for rel, size in self.unique:
                if written >= budget:
                    break
                with open(os.path.join(self.path, rel), "rb") as f:
                    data = f.read(min(per_file, budget - written))
                out.write(data)
                written += len(data)
        return written


# ---------------------------------------------------------------------------------------------
# The create benchmark

def create_commands(tools, cfg, src, prefix, jobs):
    """{tool label: (command, output path)} for one configuration; missing tools map to None."""
    label, codec, level = cfg
    cmds = {}
    out = prefix + "sqar.sqfs"
    cmds["sqar"] = ([tools.sqar, "create", "-j", str(jobs), "-c", codec, "-l", str(level), "-b", str(BLOCK_SIZE),
                     "--force", "--quiet", src, out], out) if tools.have("sqar") else None
    out = prefix + "mksquashfs.sqfs"
    cmds["mksquashfs"] = (["mksquashfs", src, out, "-noappend", "-processors", str(jobs), "-comp", codec,
                           "-Xcompression-level", str(level), "-b", str(BLOCK_SIZE), "-quiet", "-no-progress"],
                          out) if tools.have("mksquashfs") else None
    out = prefix + "gensquashfs.sqfs"
    cmds["gensquashfs"] = (["gensquashfs", "--pack-dir", src, "-c", codec, "-X", f"level={level}", "-b",
                            str(BLOCK_SIZE), "-j", str(jobs), "--keep-time", "-f", "-q", out],
                           out) if tools.have("gensquashfs") else None
    if codec == "zstd":
        out = prefix + "tar.zst"
        cmds["tar+zstd"] = (["tar", "-I", f"zstd -T0 -{level}", "-cf", out, "-C", src, "."], out) \
            if tools.have("tar") and tools.have("zstd") else None
    else:
        out = prefix + "tar.gz"
        cmds["tar+pigz"] = (["tar", "-I", f"pigz -p {jobs} -{level}", "-cf", out, "-C", src, "."], out) \
            if tools.have("tar") and tools.have("pigz") else None
    return cmds


def check_output(tools, path, reference, scratch, timeout):
    """Round trip: unpack the output with a reader we did not write and compare with the source."""
    rmtree(scratch)
    if path.endswith(".sqfs"):
        if not tools.have("unsquashfs"):
            raise StepFailed("cannot check output: unsquashfs not installed")
        run_quiet(["unsquashfs", "-d", scratch, "-q", "-n", path], timeout=timeout)
    else:
        os.makedirs(scratch)
        prog = "zstd" if path.endswith(".zst") else "pigz"
        run_quiet(["tar", "-I", prog, "-xf", path, "-C", scratch], timeout=timeout)
    try:
        compare_trees(reference, scratch)
    finally:
        rmtree(scratch)


def bench_create(ds, tools, args, mode):
    """Returns {config label: {tool: result}}; result is a list of Measurements or a failure string."""
    jobs = args.jobs
    work = os.path.join(WORK_DIR, ds.name)
    os.makedirs(work, exist_ok=True)
    plan = []  # (config label, tool, cmd)
    results = {}
    for cfg in selected_configs():
        results[cfg[0]] = {}
        for tool, cmd in create_commands(tools, cfg, ds.path, os.path.join(work, cfg[0] + "."), jobs).items():
            if cmd is None:
                results[cfg[0]][tool] = "n/a (not installed)"
            else:
                plan.append((cfg[0], tool) + cmd)
                results[cfg[0]][tool] = []
    for run in range(args.runs + 1):
        for label, tool, cmd, out in plan:
            if isinstance(results[label][tool], str):
                continue  # failed earlier
            if os.path.lexists(out):
                os.unlink(out)
            os.sync()  # the previous run's write-back must not land in this run's time
            if args.cold_create and not drop_caches():
                raise SystemExit("--cold-create needs root (writes /proc/sys/vm/drop_caches)")
            try:
                m = run_measured(cmd, mode["timeout"])
                m.size = os.path.getsize(out)
                m.fs_size = squashfs_bytes(out) if tool == "sqar" else None
                if run == 0:
                    log(f"[{ds.name}] create {label} {tool}: warm-up {m.wall:.2f} s, checking output ...")
                    check_output(tools, out, ds.reference, os.path.join(work, "check"), mode["timeout"])
                else:
                    results[label][tool].append(m)
                    log(f"[{ds.name}] create {label} {tool}: run {run}: {m.wall:.2f} s")
            except StepFailed as e:
                results[label][tool] = f"n/a (failed: {e})"
                log(f"[{ds.name}] create {label} {tool}: {e}")
    return results


# ---------------------------------------------------------------------------------------------
# The compute limit: the time the codec alone needs on all cores for the unique bytes

def codec_speed(ds, cfg, tools, sample_path):
    """One-core compression speed in bytes/s of the configuration's codec on the sample."""
    _, codec, level = cfg
    helper = build_helper("codecspeed", ["-lzstd", "-lz"], tools)
    if helper:
        out = run_quiet([helper, codec, str(level), str(BLOCK_SIZE), sample_path])
        m = re.search(r"bytes (\d+) cpu_seconds ([\d.]+)", out)
        if m and float(m.group(2)) > 0:
            return int(m.group(1)) / float(m.group(2)), "libzstd/zlib, 128 KiB blocks, 1 thread"
    if codec == "gzip":  # zlib is in the standard library: same library mksquashfs uses
        with open(sample_path, "rb") as f:
            data = f.read()
        t0 = time.process_time()
        for off in range(0, len(data), BLOCK_SIZE):
            zlib.compress(data[off:off + BLOCK_SIZE], level)
        return len(data) / max(1e-9, time.process_time() - t0), "python zlib, 128 KiB blocks"
    if tools.have("zstd"):
        out = run_quiet(["zstd", f"-b{level}", f"-B{BLOCK_SIZE}", "-i2", sample_path])
        speeds = re.findall(r"\(x[\d.]+\),\s*([\d.]+) MB/s", out.replace("\r", "\n"))
        if speeds:
            return float(speeds[-1]) * 1e6, "zstd -b, 128 KiB chunks"
    raise StepFailed("no way to measure codec speed")


def compute_limits(ds, tools, args):
    sample = os.path.join(WORK_DIR, f"{ds.name}.sample")
    ds.sample(sample, 32 << 20)
    limits = {}
    for cfg in selected_configs():
        try:
            speed, how = codec_speed(ds, cfg, tools, sample)
            limits[cfg[0]] = (ds.unique_bytes / (args.jobs * speed), speed, how)
        except (StepFailed, OSError) as e:
            limits[cfg[0]] = str(e)
    os.unlink(sample)
    return limits


# ---------------------------------------------------------------------------------------------
# The extract benchmark

def measure_round(ds, what, run, cmd, mode, check, keep):
    """One run of cmd in the interleaved rounds: run 0 is the warm-up, whose output check(m)
    verifies (raising StepFailed); later runs are appended to keep. Returns the failure as the
    table cell ("n/a (failed: ...)"), or None."""
    try:
        m = run_measured(cmd, mode["timeout"])
        if run == 0:
            log(f"[{ds.name}] {what}: warm-up {m.wall:.2f} s, checking output ...")
            check(m)
        else:
            keep.append(m)
            log(f"[{ds.name}] {what}: run {run}: {m.wall:.3f} s")
        return None
    except StepFailed as e:
        log(f"[{ds.name}] {what}: {e}")
        return f"n/a (failed: {e})"



def make_read_image(ds, tools, args, mode):
    """With create skipped: makes just the image the extract and mount benchmarks read."""
    label, codec, level = next(c for c in CONFIGS if c[0] == READ_CONFIG)
    work = os.path.join(WORK_DIR, ds.name)
    os.makedirs(work, exist_ok=True)
    cmd = create_commands(tools, (label, codec, level), ds.path, os.path.join(work, f"{label}."), args.jobs).get("sqar")
    if not cmd:
        return {}
    try:
        run_measured(cmd[0], mode["timeout"])
    except StepFailed as e:
        log(f"[{ds.name}] sqar create for the read benchmarks: {e}")
        return {}
    return {READ_CONFIG: {"sqar": []}}


def pick_read_image(ds, create_results):
    """The image the extract and mount benchmarks read: sqar's if it round-tripped, else mksquashfs'."""
    work = os.path.join(WORK_DIR, ds.name)
    for tool in ("sqar", "mksquashfs", "gensquashfs"):
        if isinstance(create_results.get(READ_CONFIG, {}).get(tool), list):
            path = os.path.join(work, f"{READ_CONFIG}.{tool}.sqfs")
            if os.path.exists(path):
                return tool, path
    return None, None


def bench_extract(ds, tools, args, mode, image, tar_path):
    """Extracts into a tmpfs when root: on ext4, creating files within ~30 s of deleting the
    previous run's 100k files scans the recently deleted inodes (recently_deleted() took 80% of
    unsquashfs' time and runs varied from 0.7 to 14 s), which measures ext4, not the extractor."""
    work = os.path.join(WORK_DIR, ds.name)
    tmp = os.path.join(work, "extract-tmpfs")
    os.makedirs(tmp, exist_ok=True)
    if os.geteuid() == 0 and not os.path.ismount(tmp):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80%", "tmpfs", tmp], check=False)
    try:
        return extract_runs(ds, tools, args, mode, image, tar_path, os.path.join(tmp, "extract"))
    finally:
        rmtree(os.path.join(tmp, "extract"))
        if os.path.ismount(tmp):
            subprocess.run(["umount", tmp], check=False)


def extract_runs(ds, tools, args, mode, image, tar_path, dest):
    cmds = {
        "sqar extract": ([tools.sqar, "extract", "-j", str(args.jobs), image, "-C", dest]
                         if tools.have("sqar") and image else None),
        "unsquashfs": (["unsquashfs", "-d", dest, "-p", str(args.jobs), "-q", "-n", image]
                       if tools.have("unsquashfs") and image else None),
        "tar -x (zstd)": (["tar", "-I", "zstd", "-xf", tar_path, "-C", dest]
                          if tools.have("tar") and tar_path and os.path.exists(tar_path) else None),
    }
    results = {k: ([] if v else "n/a (not installed)") for k, v in cmds.items()}
    if tools.have("tar") and not (tar_path and os.path.exists(tar_path)):
        results["tar -x (zstd)"] = "n/a (no tar.zst: create was skipped)"
    for run in range(args.runs + 1):
        for tool, cmd in cmds.items():
            if not isinstance(results[tool], list):
                continue
            rmtree(dest)
            if tool != "unsquashfs":  # unsquashfs creates its destination itself
                os.makedirs(dest)
            os.sync()
            failure = measure_round(ds, f"extract {tool}", run, cmd, mode,
                                    lambda m: compare_trees(ds.reference, dest), results[tool])
            if failure:
                results[tool] = failure
    rmtree(dest)
    return results


# ---------------------------------------------------------------------------------------------
# The list benchmark

def bench_list(ds, tools, args, mode, image):
    """Metadata-only commands on the image the extract benchmark reads: a long listing of every
    entry (sqar list -l vs unsquashfs -lls) and the summary (sqar info vs unsquashfs -s).
    Returns {group: {tool: [Measurement] or failure string}}; the warm-up checks that each
    listing names every entry of the source tree."""
    groups = {
        "list": {"sqar list -l": [tools.sqar, "list", "-l", image] if tools.have("sqar") else None,
                 "unsquashfs -lls": ["unsquashfs", "-n", "-lls", image] if tools.have("unsquashfs") else None},
        "info": {"sqar info": [tools.sqar, "info", image] if tools.have("sqar") else None,
                 "unsquashfs -s": ["unsquashfs", "-n", "-s", image] if tools.have("unsquashfs") else None},
    }
    results = {g: {k: ([] if v else "n/a (not installed)") for k, v in cmds.items()} for g, cmds in groups.items()}
    for run in range(args.runs + 1):
        for group, cmds in groups.items():
            for tool, cmd in cmds.items():
                if not isinstance(results[group][tool], list):
                    continue
                failure = measure_round(ds, f"{group} {tool}", run, cmd, mode,
                                        lambda m: check_listing_output(ds, group, tool, m.stdout),
                                        results[group][tool])
                if failure:
                    results[group][tool] = failure
    return results


def check_listing_output(ds, group, tool, stdout):
    """Raises StepFailed when a listing does not have a line per entry of the source tree (the
    root included), or a summary is empty."""
    lines = [l for l in stdout.splitlines() if l.strip()]
    if group == "info":
        if not lines:
            raise StepFailed("printed nothing")
        return
    # unsquashfs -lls prints a header before the entries and the root as "squashfs-root"; every
    # other entry's path starts with "squashfs-root/". sqar list leaves the root out.
    if tool.startswith("unsquashfs"):
        lines = [l for l in lines if " squashfs-root/" in l]
    if len(lines) != ds.entries:
        raise StepFailed(f"listed {len(lines)} entries, the source tree has {ds.entries}")


# ---------------------------------------------------------------------------------------------
# The mount benchmark

def find_daemon(mnt, exclude_pid=None):
    """The pid of the FUSE process serving mnt (found by its command line), or None."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == exclude_pid:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if mnt.encode() in argv:
            return int(pid)
    return None


def peak_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Mounted:
    """Mounts image at mnt with one reader; measures how long until the mount point answers."""

    def __init__(self, reader, tools, image, mnt, timeout=60):
        self.reader, self.mnt, self.proc, self.pid = reader, mnt, None, None
        if reader == "kernel":
            cmd = ["mount", "-t", "squashfs", "-o", "loop,ro", image, mnt]
        else:
            cmd = [tools.paths[reader], image, mnt]
        t0 = time.perf_counter()
        # A FUSE driver may daemonise (squashfuse) or stay in the foreground; poll the mount point.
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL)
        while not os.path.ismount(mnt):
            rc = self.proc.poll()
            if rc not in (None, 0):
                err = self.proc.stderr.read().decode(errors="replace").strip().splitlines()
                raise StepFailed(f"mount failed: {err[-1][:160] if err else f'exit {rc}'}")
            if time.perf_counter() - t0 > timeout:
                self.close()
                raise StepFailed("mount timed out")
            time.sleep(0.001)
        self.mount_time = time.perf_counter() - t0
        if reader != "kernel":
            self.pid = self.proc.pid if self.proc.poll() is None else find_daemon(mnt, exclude_pid=os.getpid())

    def rss_kib(self):
        return peak_rss_kib(self.pid) if self.pid else None

    def close(self):
        if os.path.ismount(self.mnt):
            if self.reader == "kernel":
                subprocess.run(["umount", self.mnt], check=False)
            else:
                fm = shutil.which("fusermount3") or shutil.which("fusermount")
                r = subprocess.run([fm, "-u", self.mnt] if fm else ["umount", self.mnt], stderr=subprocess.DEVNULL)
                if r.returncode != 0:
                    subprocess.run(["umount", "-l", self.mnt], check=False)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()


def walk_lstat(root):
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.lstat(os.path.join(dirpath, name))
            n += 1
    return n


def write_lists(ds, mnt):
    """File lists for randread: every file, and a random sample of up to 2000 non-empty files."""
    work = os.path.join(WORK_DIR, ds.name)
    files = sorted((k, v[2]) for k, v in ds.reference.items() if v[0] == "file")
    all_list = os.path.join(work, "all-files.txt")
    with open(all_list, "w") as f:
        for rel, size in files:
            f.write(f"{size}\t{os.path.join(mnt, rel)}\n")
    rnd = random.Random(1)
    nonempty = [(rel, size) for rel, size in files if size > 0]
    picked = nonempty if len(nonempty) <= 2000 else rnd.sample(nonempty, 2000)
    rand_list = os.path.join(work, "rand-files.txt")
    with open(rand_list, "w") as f:
        for rel, size in picked:
            f.write(f"{size}\t{os.path.join(mnt, rel)}\n")
    return all_list, rand_list


def bench_mounts(ds, tools, args, mode, image):
    """Returns ({reader: {op: [values]} or failure string}, whether caches were dropped,
    operations started on a busy machine)."""
    readers = ["kernel", "squashfuse", "squashfuse_ll", "sqarfs"]
    results = {}
    for r in readers:
        if r == "kernel":
            ok = os.geteuid() == 0 and tools.have("mount")
            results[r] = {} if ok else "n/a (needs root for mount -o loop)"
        else:
            results[r] = {} if tools.have(r) else "n/a (not installed)"
    return mount_rounds(ds, tools, args, mode, image, readers, results)


def mount_rounds(ds, tools, args, mode, image, readers, results):
    mnt = os.path.join(WORK_DIR, ds.name, "mnt")
    os.makedirs(mnt, exist_ok=True)
    if os.path.ismount(mnt):
        subprocess.run(["umount", "-l", mnt], check=False)
    helper = build_helper("randread", [], tools)
    all_list, rand_list = write_lists(ds, mnt)
    dropped = True
    busy_runs = 0
    ops = ["read all", "random 4K", "walk+lstat"]
    for run in range(args.runs + 1):
        for op in ops:
            for reader in readers:
                res = results[reader]
                if isinstance(res, str):
                    continue
                try:
                    m = Mounted(reader, tools, image, mnt)
                    try:
                        # The first request waits for a FUSE daemon's INIT; every reader gets the
                        # same stat of its root.
                        os.stat(mnt)
                        if run == 0 and op == ops[0]:
                            log(f"[{ds.name}] mount {reader}: checking every file through the mount ...")
                            compare_trees(ds.reference, mnt)
                        if args.idle_wait and not wait_idle(args.idle_wait):
                            busy_runs += 1
                        dropped = drop_caches() and dropped
                        value = mount_op(op, mnt, helper, all_list, rand_list, args, mode)
                        values = value if isinstance(value, dict) else {op: value}
                        value = values[op]
                        if run > 0:
                            res.setdefault("mount", []).append(m.mount_time)
                            for key, v in values.items():
                                res.setdefault(key, []).append(v)
                            rss = m.rss_kib()
                            if rss:
                                res.setdefault("rss", []).append(rss)
                            log(f"[{ds.name}] mount {reader} {op}: run {run}: {value:.3f}")
                    finally:
                        m.close()
                except (StepFailed, OSError) as e:
                    results[reader] = f"n/a (failed: {e})"
                    log(f"[{ds.name}] mount {reader}: {e}")
    if busy_runs:
        log(f"[{ds.name}] {busy_runs} mount operations started on a busy machine (idle wait timed out)")
    return results, dropped, busy_runs


def mount_op(op, mnt, helper, all_list, rand_list, args, mode):
    """Runs one read pattern on the mounted image; returns seconds, or for random 4K reads/s
    without and with the opens ({op: value})."""
    if op == "walk+lstat":
        t0 = time.perf_counter()
        walk_lstat(mnt)
        return time.perf_counter() - t0
    if op == "read all":
        if helper:
            m = run_measured([helper, "all", str(args.jobs), all_list], mode["timeout"])
            return m.wall
        t0 = time.perf_counter()
        with open(all_list) as f:
            for line in f:
                with open(line.rstrip("\n").split("\t", 1)[1], "rb", buffering=0) as g:
                    while g.read(1 << 17):
                        pass
        return time.perf_counter() - t0
    if op == "random 4K":
        if not helper:
            raise StepFailed("random reads need cc to build bench/randread.c")
        m = run_measured([helper, "random", "4", str(mode["rand_seconds"]), rand_list], mode["timeout"])
        reads, secs, open_secs = re.search(r"reads (\d+) seconds ([\d.]+) open_seconds ([\d.]+)", m.stdout).groups()
        # Also with the opens counted: a driver that starts decompressing at lookup time does
        # part of the reads' work while the (untimed) opens run.
        return {"random 4K": int(reads) / float(secs),
                "random 4K+open": int(reads) / (float(secs) + float(open_secs))}
    raise ValueError(op)


# ---------------------------------------------------------------------------------------------
# Report

def machine_description(tools):
    cpu = "unknown"
    mem = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
        with open("/proc/meminfo") as f:
            kib = int(next(l.split()[1] for l in f if l.startswith("MemTotal")))
            mem = f"{kib / 2**20:.1f} GiB"
    except (OSError, StopIteration):
        pass
    distro = ""
    try:
        with open("/etc/os-release") as f:
            distro = next((l.split("=", 1)[1].strip().strip('"') for l in f if l.startswith("PRETTY_NAME")), "")
    except OSError:
        pass
    lines = [f"- CPU: {cpu}, {os.cpu_count()} online cores (nproc); memory {mem}",
             f"- OS: {distro}, kernel {platform.release()}, Python {platform.python_version()}",
             "- Tools: " + "; ".join(f"{k}: {v}" for k, v in tools.versions().items())]
    return "\n".join(lines)


def med(values):
    return statistics.median(values) if values else None


def fmt(v, digits=2):
    return "—" if v is None else f"{v:.{digits}f}"


def ratio(a, b):
    return "—" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def squashfs_bytes(path):
    """The SquashFS part of an image: bytes_used padded to 4 KiB, without sqar's manifest trailer."""
    with open(path, "rb") as f:
        sb = f.read(96)
    if len(sb) < 48 or sb[:4] != b"hsqs":
        return None
    used = int.from_bytes(sb[40:48], "little")
    return (used + 4095) // 4096 * 4096


def create_table(ds, results, limits):
    out = ["| config | tool | wall s | CPU s | peak RSS MiB | size MiB | sqar/peer wall | CPU | RSS | size |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for cfg in selected_configs():
        label = cfg[0]
        rows = results[label]
        stats = {}
        for tool, res in rows.items():
            if isinstance(res, list) and res:
                stats[tool] = (med([m.wall for m in res]), med([m.cpu for m in res]),
                               med([m.rss_kib for m in res]) / 1024, med([m.size for m in res]) / 2**20)
        sq = stats.get("sqar")
        for tool, res in rows.items():
            if tool not in stats:
                out.append(f"| {label} | {tool} | {res if isinstance(res, str) else 'n/a (no runs)'} | | | | | | | |")
                continue
            w, c, r, s = stats[tool]
            ratios = ["" for _ in range(4)] if tool == "sqar" or not sq else \
                [ratio(sq[i], stats[tool][i]) for i in range(4)]
            out.append(f"| {label} | {tool} | {fmt(w)} | {fmt(c)} | {fmt(r, 0)} | {fmt(s, 1)} | " + " | ".join(ratios) + " |")
        sq_runs = rows.get("sqar")
        peer = stats.get("mksquashfs")
        if isinstance(sq_runs, list) and sq_runs and sq_runs[0].fs_size:
            fs = sq_runs[0].fs_size / 2**20
            vs = f", {fs / peer[3]:.3f}x mksquashfs" if peer else ""
            notes.append(f"- {label}: sqar's SquashFS part alone (without the {sq[3] - fs:.1f} MiB manifest trailer "
                         f"of content XXH3-128 hashes) is {fs:.1f} MiB{vs}")
        lim = limits.get(label)
        if isinstance(lim, tuple):
            secs, speed, how = lim
            sq_txt = f"sqar wall / limit = {sq[0] / secs:.2f}" if sq and secs > 0 else "sqar: n/a"
            notes.append(f"- {label} compute limit: {secs:.3f} s = unique {ds.unique_bytes / 2**20:.1f} MiB / "
                         f"({ARGS.jobs} cores × {speed / 2**20:.1f} MiB/s one-core "
                         f"codec speed, {how}); {sq_txt}")
        elif lim:
            notes.append(f"- {label} compute limit: n/a ({lim})")
    return "\n".join(out + [""] + notes)


def simple_table(results, sqar_name, value_names, digits=2):
    """Rows of tools with median wall/CPU/RSS and ratios to the sqar row."""
    out = ["| tool | wall s | CPU s | peak RSS MiB | sqar/peer wall | CPU | RSS |", "|---|---:|---:|---:|---:|---:|---:|"]
    stats = {t: (med([m.wall for m in r]), med([m.cpu for m in r]), med([m.rss_kib for m in r]) / 1024)
             for t, r in results.items() if isinstance(r, list) and r}
    sq = stats.get(sqar_name)
    for tool, res in results.items():
        if tool not in stats:
            out.append(f"| {tool} | {res if isinstance(res, str) else 'n/a (no runs)'} | | | | | |")
            continue
        ratios = ["", "", ""] if tool == sqar_name or not sq else [ratio(sq[i], stats[tool][i]) for i in range(3)]
        w, c, r = stats[tool]
        out.append(f"| {tool} | {fmt(w, digits)} | {fmt(c, digits)} | {fmt(r, 0)} | " + " | ".join(ratios) + " |")
    return "\n".join(out)


def mount_table(results):
    cols = [("mount", "mount s", 3, False), ("read all", "read all s", 2, False),
            ("random 4K", "random 4K reads/s", 0, True),
            ("random 4K+open", "random 4K with the opens reads/s", 0, True), ("walk+lstat", "walk+lstat s", 2, False),
            ("rss", "daemon peak RSS MiB", 0, False)]
    head = "| reader | " + " | ".join(c[1] for c in cols) + " | sqarfs/peer: " + " | ".join(c[0] for c in cols) + " |"
    out = [head, "|---|" + "---:|" * (2 * len(cols))]
    stats = {}
    for r, res in results.items():
        if isinstance(res, dict) and res:
            stats[r] = {k: (med(v) / 1024 if k == "rss" else med(v)) for k, v in res.items()}
    sq = stats.get("sqarfs")
    for r, res in results.items():
        if r not in stats:
            out.append(f"| {r} | {res if isinstance(res, str) else 'n/a (no runs)'} |" + " |" * (2 * len(cols) - 1))
            continue
        vals = [fmt(stats[r].get(k), d) for k, _, d, _ in cols]
        rats = ["" if r == "sqarfs" or not sq else ratio(sq.get(k), stats[r].get(k)) for k, *_ in cols]
        out.append(f"| {r} | " + " | ".join(vals) + " | " + " | ".join(rats) + " |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="examples:\n  python3 bench/run.py --quick\n"
                                       "  python3 bench/run.py --full --sets ports --runs 3\n"
                                       "  python3 bench/run.py --quick --sqar build-rel/tools/sqar --skip mount")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="mode", action="store_const", const="quick", help="small data (default)")
    g.add_argument("--full", dest="mode", action="store_const", const="full", help="data sets at scale 1.0")
    p.add_argument("--sets", default="log,movie,ports", help="comma-separated data sets (log,movie,ports)")
    p.add_argument("--runs", type=int, help="timed runs per tool after the warm-up (default 3 quick / 5 full)")
    p.add_argument("--scale", type=float, help="override the data scale of the mode")
    p.add_argument("--jobs", type=int, default=os.cpu_count(), help="cores given to every tool (default: nproc)")
    p.add_argument("--skip", default="", help="comma-separated parts to skip: create,extract,list,mount")
    p.add_argument("--sqar", help="sqar binary (default build/tools/sqar)")
    p.add_argument("--sqarfs", help="sqarfs binary (default build/fuse/sqarfs)")
    p.add_argument("--gen-data", help="path of gen_data.py (default ../shared/bench/gen_data.py)")
    p.add_argument("--out", help="report file (default bench/results/YYYY-MM-DD-MODE.md)")
    p.add_argument("--configs", default="", help="comma-separated create configurations (default all: "
                   + ",".join(c[0] for c in CONFIGS) + ")")
    p.add_argument("--cold-create", action="store_true",
                   help="drop the page, dentry and inode caches before every create run (root): the source "
                        "tree is read from disk, as when packing a tree nobody read lately")
    p.add_argument("--idle-wait", type=float, default=0, metavar="SECONDS",
                   help="before each mount operation, wait up to SECONDS for 1 s of idle CPUs (shared machines)")
    a = p.parse_args()
    a.mode = a.mode or "quick"
    a.runs = a.runs if a.runs is not None else MODES[a.mode]["runs"]
    a.sets = [s for s in a.sets.split(",") if s]
    a.skip = set(s for s in a.skip.split(",") if s)
    a.configs = [c for c in a.configs.split(",") if c]
    for c in a.configs:
        if c not in [k[0] for k in CONFIGS]:
            p.error(f"unknown configuration '{c}' (choose from {', '.join(k[0] for k in CONFIGS)})")
    for s in a.sets:
        if s not in ("log", "movie", "ports"):
            p.error(f"unknown data set '{s}' (choose from log, movie, ports)")
    if a.runs < 1:
        p.error("--runs must be at least 1")
    return a


ARGS = None


def main():
    global ARGS
    ARGS = args = parse_args()
    mode = dict(MODES[args.mode])
    if args.scale:
        mode["scale"] = args.scale
    os.makedirs(WORK_DIR, exist_ok=True)
    os.makedirs(RESULTS_DIR, exist_ok=True)
    tools = Tools(args)
    gen_data = find_gen_data(args)
    started = time.time()
    today = datetime.date.today().isoformat()
    report = [f"# sqar benchmark: {args.mode} mode, {today}", "",
              f"Command: `python3 bench/run.py --{args.mode} --sets {','.join(args.sets)} --runs {args.runs}"
              + (f" --scale {args.scale:g}" if args.scale else "")
              + (f" --skip {','.join(sorted(args.skip))}" if args.skip else "")
              + (f" --configs {','.join(args.configs)}" if args.configs else "")
              + (" --cold-create" if args.cold_create else "")
              + (f" --idle-wait {args.idle_wait:g}" if args.idle_wait else "")
              + "`", "",
              machine_description(tools), "",
              "Method: every tool runs once as a warm-up (its output is then unpacked with unsquashfs or tar "
              "and compared with the source tree: paths, types, permissions, sizes, content hashes, link "
              f"targets), then {args.runs} timed runs, interleaved round-robin across tools. Numbers are "
              "medians. Wall time and user+sys CPU (child and its descendants) come from wait4(); peak RSS "
              "(largest single process) from GNU time's %M. "
              + ("Create runs with a cold cache (`sync`, then page, dentry and inode caches dropped before "
                 "every run: the source tree is read from disk); extract with a warm one "
                 if args.cold_create else "Create and extract run with a warm page cache ")
              + f"(`sync` before each run, output not fsynced). Every tool gets {args.jobs} cores "
              f"(`-processors`, `-j`, `-T0`/`pigz -p`); block size {BLOCK_SIZE // 1024} KiB. "
              "Ratios are sqar/peer: below 1 means sqar is smaller or faster, except for random reads/s "
              "where above 1 means sqarfs is faster. Image sizes include padding (and sqar's manifest trailer).", ""]
    for name in args.sets:
        path = ensure_data(name, mode["scale"], gen_data)
        ds = DataSet(name, path)
        report += [f"## {name}", "",
                   f"{ds.entries} entries, {ds.files} files, {ds.total_bytes / 2**20:.1f} MiB of file data, "
                   f"{ds.unique_bytes / 2**20:.1f} MiB unique (whole-file dedup), scale {mode['scale']:g}.", ""]
        create_res = None
        if "create" not in args.skip:
            create_res = bench_create(ds, tools, args, mode)
            limits = compute_limits(ds, tools, args)
            report += ["### create", "", create_table(ds, create_res, limits), ""]
        else:
            create_res = make_read_image(ds, tools, args, mode)
        img_tool, image = pick_read_image(ds, create_res)
        tar_path = os.path.join(WORK_DIR, name, f"{READ_CONFIG}.tar.zst")
        if "extract" not in args.skip:
            res = bench_extract(ds, tools, args, mode, image, tar_path)
            report += ["### extract", "",
                       f"Image: {READ_CONFIG} made by {img_tool} (both squashfs extractors read the same image); "
                       f"tar -x reads the {READ_CONFIG} tar.zst. Output goes to a tmpfs (when root)." if image else "No image to extract (create skipped or failed).",
                       "", simple_table(res, "sqar extract", None), ""]
        if "list" not in args.skip and image:
            res = bench_list(ds, tools, args, mode, image)
            report += ["### list and info", "",
                       f"Image: {READ_CONFIG} made by {img_tool} ({ds.entries} entries); both tools read the same "
                       "image with a warm page cache, output captured to a file. list = a long listing of every "
                       "entry (`sqar list -l` vs `unsquashfs -lls`); info = the image summary (`sqar info` vs "
                       "`unsquashfs -s`).", "",
                       simple_table(res["list"], "sqar list -l", None, 3), "",
                       simple_table(res["info"], "sqar info", None, 3), ""]
        if "mount" not in args.skip:
            if image:
                res, dropped, busy_runs = bench_mounts(ds, tools, args, mode, image)
                cache_note = ("Page, dentry and inode caches were dropped (`echo 3 > /proc/sys/vm/drop_caches`) "
                              "after each mount and before each measured operation; every operation runs on a "
                              "fresh mount, so the image itself is read cold from disk by every reader."
                              if dropped else "Caches could NOT be dropped (not root): warm-cache numbers.")
                if args.idle_wait:
                    cache_note += (f" Before each operation the runner waited (up to {args.idle_wait:g} s) for 1 s of "
                                   f"idle CPUs; {busy_runs} operations started without one.")
                report += ["### reads through a mount", "",
                           f"Image: {READ_CONFIG} made by {img_tool}. read all = every file read to the end by "
                           f"{args.jobs} threads; random 4K = 4 threads reading the 4 KiB pages of up to 2000 "
                           f"random files in random order, each page once, readahead off (POSIX_FADV_RANDOM), for at "
                           f"most {mode['rand_seconds']:g} s, after opening them all (untimed; \"with the opens\" "
                           f"counts that time too); walk+lstat = os.walk + lstat of every "
                           "entry. " + cache_note,
                           "", mount_table(res), ""]
            else:
                report += ["### reads through a mount", "", "n/a (no image: create skipped or failed)", ""]
        shutil.rmtree(os.path.join(WORK_DIR, name), ignore_errors=True)
    report.append(f"Total bench time: {(time.time() - started) / 60:.1f} min.")
    text = "\n".join(report) + "\n"
    out = args.out or os.path.join(RESULTS_DIR, f"{today}-{args.mode}.md")
    with open(out, "w") as f:
        f.write(text)
    print(text)
    log(f"report written to {out}")


if __name__ == "__main__":
    main()
