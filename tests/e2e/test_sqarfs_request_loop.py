#!/usr/bin/env python3
"""sqarfs's request loop (fuse/request_loop.cpp) in every configuration users can pick:
the spinning leader/followers loop (default, with 1 and 16 threads) and libfuse's own loops
(spin=0, with and without -s). Each must serve a full tree and 16 concurrent readers exactly,
end cleanly on unmount, SIGTERM and SIGINT (mount gone, exit 0, no sanitizer report), and
stop spinning while the mount is idle (every thread asleep in a system call). Both hand-off
modes serve concurrent readers. With two or more CPUs the request threads form one listener
group per CPU, each pinned to it: the extra groups stay asleep while a single client walks
the tree and wake while several send requests. Bad spin and handoff values are refused.
These are states and counts, never CPU time or durations: the test also runs under TSan and
next to other tests. How little CPU the adaptive spin takes under a slow client is measured
by bench/sqarfs_spin.py."""
import os
import random
import signal
import subprocess
import sys
import time

from sqarfs_common import fuse_workspace, make_tree, rand_bytes, sqarfs_binary, sqarfs_refused
from sqarfs_foreground import ForegroundMount
from sqartest import MKSQUASHFS_IGNORE, is_mounted, mksquashfs, sanitizer_problem, skip, tree_differences, unmount_fuse
from test_sqarfs_threads import hammer

CONFIGS = [
    ("spin default, 16 threads", ["-o", "threads=16"]),
    ("handoff=queued, 16 threads", ["-o", "handoff=queued,threads=16"]),
    ("handoff=slow, 16 threads", ["-o", "handoff=slow,threads=16"]),
    ("spin=2000, 1 thread", ["-o", "spin=2000,threads=1"]),
    ("spin=100, -s", ["-o", "spin=100", "-s"]),
    ("spin=0 (libfuse multithreaded loop)", ["-o", "spin=0,threads=8"]),
    ("spin=0, -s (libfuse single-threaded loop)", ["-o", "spin=0", "-s"]),
]


def running_threads(pid, tids=None):
    """Thread ids of pid (or of `tids`) that are on a CPU or runnable right now: /proc's
    syscall file says "running" for those; a thread asleep in a system call shows its number."""
    out = set()
    for tid in tids if tids is not None else os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                if f.read().startswith("running"):
                    out.add(int(tid))
        except OSError:
            continue  # the thread ended meanwhile
    return out


def spinning_threads(pid, samples=20, tids=None, during=None):
    """Threads of pid found running in more than half of `samples` looks (spread while
    `during` runs, if given, else over about a second). A thread that spins is runnable at every
    look, however busy the machine; one that sleeps in poll or on a futex is never."""
    import threading
    counts = {}
    done = threading.Event()
    worker = None
    if during is not None:
        def work():
            try:
                during()
            finally:
                done.set()
        worker = threading.Thread(target=work)
        worker.start()
    taken = 0
    while taken < samples and not (worker is not None and done.is_set() and taken >= 5):
        for t in running_threads(pid, tids):
            counts[t] = counts.get(t, 0) + 1
        taken += 1
        time.sleep(0.05 if during is None else 0.005)
    if worker is not None:
        worker.join()
    return {t: n for t, n in counts.items() if n * 2 > taken}, taken


def context_switches(pid, tids, kinds=("voluntary_ctxt", "nonvoluntary_ctxt")):
    """Context switches of the threads (voluntary ones: each time they went to sleep). Grows
    only when they run."""
    total = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith(kinds))
        except OSError:
            continue
    return total


def pinned_threads(pid):
    """{thread id: CPU} of the daemon's threads allowed on exactly one CPU."""
    pins = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                allowed = next(line.split(":", 1)[1].strip() for line in f if line.startswith("Cpus_allowed_list"))
        except FileNotFoundError:
            continue  # the thread ended meanwhile
        if allowed.isdigit():
            pins[int(tid)] = int(allowed)
    return pins


def wait_for_pinned_groups(pid, cpus, timeout=10.0):
    """The request threads pin themselves as they start, which may trail the mount (slowly
    under sanitizers): waits until the threads are pinned to at least two CPUs, the first
    allowed one among them. Returns the last {thread id: CPU} seen."""
    deadline = time.monotonic() + timeout
    while True:
        pins = pinned_threads(pid)
        if (len(set(pins.values())) >= 2 and cpus[0] in pins.values()) or time.monotonic() > deadline:
            return pins
        time.sleep(0.02)


def check_listener_groups(sqarfs, img, mnt, src, contents, not_checked):
    """The extra listener groups: pinned one per CPU, asleep for a single client, listening
    for several. Returns failures; appends to not_checked why it could not run."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        not_checked.append(f"listener groups: this test may only use CPU {cpus}, so sqarfs makes one group")
        return []
    failures = []
    # A fresh mount per phase, so the reads reach the daemon instead of the page cache.
    with ForegroundMount([sqarfs, img, mnt], mnt) as m:
        if not m.mounted:
            return [f"listener groups: did not mount: {m.stderr[-500:]}"]
        pins = wait_for_pinned_groups(m.proc.pid, cpus)
        extra = [t for t, c in pins.items() if c != cpus[0]]
        if len(set(pins.values())) < 2 or not any(c == cpus[0] for c in pins.values()):
            failures.append(f"listener groups: request threads are not pinned one group per CPU: {pins}")
        # An extra listener sleeps until the gate calls it, listens while called, then sleeps
        # again: its voluntary context switches count the calls. The gate may open once, for
        # its 10 ms hold, when the walk's thread follows the mount's; a single client must not
        # call them again and again. (Whether they are on a CPU at a given moment says nothing
        # here: on a loaded machine a called listener may wait long for its pinned CPU.)
        sleeps_before = context_switches(m.proc.pid, extra, ("voluntary_ctxt",))
        problems, seen = tree_differences(src, mnt, ignore=MKSQUASHFS_IGNORE)  # one client thread
        sleeps = context_switches(m.proc.pid, extra, ("voluntary_ctxt",)) - sleeps_before
        failures += [f"listener groups, one client: {p}" for p in problems]
        if sleeps > 2 * len(extra):
            failures.append(f"listener groups: the {len(extra)} extra listeners went to sleep {sleeps} times while "
                            f"a single client walked the tree: called again and again (at most once expected)")
        # Then, with nobody asking, they must all be asleep.
        spinning, looks = spinning_threads(m.proc.pid, tids=extra)
        if spinning:
            failures.append(f"listener groups: extra listeners {sorted(spinning)} were running in most of {looks} "
                            f"looks over a second after a single client's walk (they should sleep)")
    # The gate calls the extra groups when requests queue up. On a machine busy with other
    # tests (and slowed by TSan) eight clients may not queue enough in one round: up to three
    # rounds, each on a fresh mount (a second round on one mount would read the page cache).
    for _ in range(3):
        with ForegroundMount([sqarfs, img, mnt], mnt) as m:
            if not m.mounted:
                return failures + [f"listener groups: did not mount: {m.stderr[-500:]}"]
            extra = [t for t, c in wait_for_pinned_groups(m.proc.pid, cpus).items() if c != cpus[0]]
            before = context_switches(m.proc.pid, extra)
            errs = hammer(mnt, contents, threads=8, reads=100)
            several = context_switches(m.proc.pid, extra) - before
            failures += [f"listener groups, 8 clients: {e}" for e in errs]
        if several > 0 or errs:
            break
    print(f"listener groups: pinned {pins}; extra listeners slept {sleeps} times during a walk of {seen} entries "
          f"by one client, running afterwards: {sorted(spinning) or 'none'}; {several} context switches of theirs "
          f"while 8 clients read")
    if several <= 0:
        failures.append("listener groups: the extra groups never ran while 8 clients read")
    return failures


def code_pages(pid):
    """(resident KiB, size KiB) of the daemon's executable code mappings, from smaps."""
    exe = os.readlink(f"/proc/{pid}/exe")
    rss = size = 0
    inside = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                inside = len(fields) >= 6 and fields[1][2] == "x" and fields[5] == exe
            elif inside and fields[0] == "Size:":
                size += int(fields[1])
            elif inside and fields[0] == "Rss:":
                rss += int(fields[1])
    return rss, size


def check_code_resident(sqarfs, img, mnt):
    """The daemon maps all of its code after mounting (fuse/resident_code.h), so dropping the
    page cache cannot send its first requests to the disk for it. Returns failures."""
    with ForegroundMount([sqarfs, img, mnt], mnt) as m:
        if not m.mounted:
            return [f"code residency: did not mount: {m.stderr[-500:]}"]
        deadline = time.monotonic() + 10
        while code_pages(m.proc.pid)[0] < code_pages(m.proc.pid)[1] and time.monotonic() < deadline:
            time.sleep(0.02)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        rss, size = code_pages(m.proc.pid)
    print(f"code residency: {rss} of {size} KiB of the daemon's code mapped after drop_caches")
    if size == 0 or rss < size:
        return [f"code residency: only {rss} of {size} KiB of the daemon's code stayed mapped after drop_caches"]
    return []


def wait_gone(proc, mnt, timeout=20):
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    deadline = time.monotonic() + 5
    while is_mounted(mnt) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not is_mounted(mnt)


def main():
    failures = []
    with fuse_workspace() as (tmp, src, mnt):
        img = f"{tmp}/img.sqfs"
        make_tree(src)
        rng = random.Random(3)
        contents = {}
        for i in range(3):
            contents[f"big/r{i}"] = rand_bytes(rng, 700_000 + i * 999, i % 2 == 0)
            with open(f"{src}/big/r{i}", "wb") as f:
                f.write(contents[f"big/r{i}"])
        mksquashfs(src, img, "-comp", "zstd")
        os.makedirs(mnt)
        sqarfs = sqarfs_binary()

        for label, opts in CONFIGS:
            # Content and metadata of the whole tree, then 16 threads of random reads.
            with ForegroundMount([sqarfs, img, mnt] + opts, mnt) as m:
                if not m.mounted:
                    failures.append(f"{label}: did not mount: {m.stderr[-500:]}")
                    continue
                problems, seen = tree_differences(src, mnt, ignore=MKSQUASHFS_IGNORE)
                if seen < 10:
                    problems.append(f"only {seen} entries compared")
                errs = hammer(mnt, contents, threads=16, reads=60)
                # Idle: the spin window (at most 10 ms) has long passed after 0.3 s; then every
                # thread must be asleep, not polling /dev/fuse.
                time.sleep(0.3)
                spinning, looks = spinning_threads(m.proc.pid)
            ended = m.problem()
            print(f"{label}: tree of {seen} entries {'OK' if not problems else problems[:3]}, readers "
                  f"{'OK' if not errs else errs[:3]}, threads running while idle: {sorted(spinning) or 'none'}, "
                  f"end after unmount: {ended or 'OK'}")
            failures += [f"{label}: {p}" for p in problems + errs]
            if spinning:
                failures.append(f"{label}: threads {sorted(spinning)} were running in most of {looks} looks over a "
                                f"second while the mount was idle (spinning never stopped)")
            if ended:
                failures.append(f"{label}: {ended}")

        not_checked = []
        failures += check_listener_groups(sqarfs, img, mnt, src, contents, not_checked)
        failures += check_code_resident(sqarfs, img, mnt)

        # Signals: the daemon unmounts and exits 0 (both loops).
        both_loops = [c for c in CONFIGS if c[0].startswith(("spin default", "spin=0 (libfuse multithreaded"))]
        assert len(both_loops) == 2
        for label, opts in both_loops:
            for sig in (signal.SIGTERM, signal.SIGINT):
                proc = subprocess.Popen([sqarfs, img, mnt, "-f"] + opts, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
                deadline = time.monotonic() + 20
                while not is_mounted(mnt) and time.monotonic() < deadline and proc.poll() is None:
                    time.sleep(0.01)
                os.listdir(mnt)  # at least one request served before the signal
                proc.send_signal(sig)
                gone = wait_gone(proc, mnt)
                err = proc.stderr.read() if proc.poll() is not None else ""
                ok = gone and proc.returncode == 0 and not sanitizer_problem(proc.args, proc.returncode, err)
                print(f"{label}: {sig.name}: {'OK' if ok else f'exit {proc.returncode}, mounted={is_mounted(mnt)}'}")
                if not ok:
                    failures.append(f"{label}: {sig.name}: exit {proc.returncode}, still mounted "
                                    f"{is_mounted(mnt)}, stderr {err[-500:]}")
                    if proc.poll() is None:
                        proc.kill()
                    unmount_fuse(mnt)

        # Bad values: refused before mounting, naming the option.
        for bad in ("spin=abc", "spin=20000", "spin=-1", "handoff=sometimes"):
            r = sqarfs_refused([img, mnt, "-o", bad], mnt)
            ok = r.returncode != 0 and bad.split("=")[0] in r.stderr and not r.mounted
            print(f"-o {bad}: {'refused' if ok else 'ACCEPTED'}: {r.stderr.strip()}")
            if not ok:
                failures.append(f"-o {bad} was not refused: exit {r.returncode}, {r.stderr}")
    for f in failures:
        print("FAIL:", f)
    if not failures and not_checked:
        skip("; ".join(not_checked))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
