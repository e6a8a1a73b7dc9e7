"""Changing a source tree at a known point of a running sqar: the test watches the tree with
inotify, stops sqar (SIGSTOP) when it opens (or reads) a chosen file or directory, makes the
change, and lets it go on (SIGCONT). A try where sqar had already reached what the change
touches does not count (run_changing says so), and the caller tries again."""
import contextlib
import ctypes
import os
import select
import signal
import struct
import subprocess
import time

from sqartest import log

IN_ACCESS = 0x1
IN_OPEN = 0x20
IN_ISDIR = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)


class Inotify:
    def __init__(self):
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, f"inotify_init1: {os.strerror(ctypes.get_errno())}"
        self.buf = b""

    def watch(self, path, mask):
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        assert wd >= 0, f"inotify_add_watch {path}: {os.strerror(ctypes.get_errno())}"
        return wd

    def events(self, timeout):
        """[(wd, mask, name)] queued now, waiting up to timeout seconds for the first."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return []
        try:
            self.buf += os.read(self.fd, 1 << 16)
        except BlockingIOError:
            pass
        out = []
        while len(self.buf) >= 16:
            wd, mask, _, n = struct.unpack_from("iIII", self.buf)
            if len(self.buf) < 16 + n:
                break
            out.append((wd, mask, self.buf[16:16 + n].rstrip(b"\0").decode()))
            self.buf = self.buf[16 + n:]
        return out

    def close(self):
        os.close(self.fd)


def all_stopped(pid):
    """Whether every thread of pid is stopped (or gone: a process that ended is a zombie)."""
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] not in ("T", "t", "Z", "X"):
                    return False
    except FileNotFoundError:
        return True
    return True


@contextlib.contextmanager
def prompt_watcher():
    """Runs the block at real-time priority where allowed (root), its children at normal
    priority: the watcher must stop sqar between two of its system calls, and on a machine
    busy with other tests (ctest -j2) a watcher of normal priority woke after sqar had read
    the whole file. Elsewhere the block runs as it is."""
    try:
        old = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
    except (OSError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        os.sched_setscheduler(0, old[0], old[1])


def run_changing(cmd, src, change, trigger_at=("a", "first"), changed=None, guarded="z", dirs=False, on=IN_OPEN):
    """Runs cmd; when it opens src/a/first (the first file of the data pass; or trigger_at:
    directory below src, name in it) stops it, calls change() and continues it. Returns
    (CompletedProcess-like, valid): valid is False when a file of src/z (or `guarded`) that
    change() changes (any, unless `changed` names them) was opened after that point but before
    sqar stopped. dirs=True watches directory opens (the scan) instead of file opens; on=IN_ACCESS
    stops it at the trigger's first read instead of its open. The process gets `trigger_opens`:
    how often the trigger was opened before sqar stopped."""
    ino = Inotify()
    guard = ino.watch(f"{src}/{guarded}", IN_OPEN | on)
    trigger = ino.watch(f"{src}/{trigger_at[0]}", IN_OPEN | on) if trigger_at[0] != guarded else guard
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    fired = False
    early = []
    trigger_opens = 0
    try:
        with prompt_watcher():
            while p.poll() is None and not fired:
                for wd, mask, name in ino.events(0.05):
                    if not dirs and (mask & IN_ISDIR or not name):
                        continue
                    trigger_opens += wd == trigger and name == trigger_at[1] and bool(mask & IN_OPEN)
                    if wd == trigger and name == trigger_at[1] and mask & on and not fired:
                        os.kill(p.pid, signal.SIGSTOP)
                        fired = True
                    elif (wd == guard and fired and name != trigger_at[1] and mask & IN_OPEN
                          and (changed is None or name in changed)):
                        early.append(name or guarded)
                if fired:
                    while not all_stopped(p.pid):
                        time.sleep(0.0001)  # at real-time priority: leave the core to sqar's threads
                    late = ino.events(0)
                    early += [n or guarded for wd, m, n in late if wd == guard and n != trigger_at[1] and m & IN_OPEN
                              and (dirs or (n and not m & IN_ISDIR)) and (changed is None or n in changed)]
                    trigger_opens += sum(wd == trigger and n == trigger_at[1] and bool(m & IN_OPEN) for wd, m, n in late)
                    change()
                    os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        ino.close()
    assert fired, f"sqar never opened {src}/{'/'.join(trigger_at)}: {err}"
    p.stdout, p.stderr = out, err
    p.trigger_opens = trigger_opens
    return p, not early


def until_valid(tries, attempt, missed):
    """Calls attempt(n) for n = 1, 2, ... until it returns (result, True), and returns that
    result. A try that returns (_, False) did not test what it meant to (`missed` says why:
    "sqar had opened z/ before it stopped") and is logged and made again; after `tries` such
    tries the test fails."""
    for n in range(1, tries + 1):
        result, valid = attempt(n)
        if valid:
            return result
        log(f"try {n}: {missed}; trying again")
    raise AssertionError(f"in {tries} tries, every time: {missed}")
