"""A sqarfs daemon kept in the foreground, so its exit status and stderr (sanitizer and leak
reports of the ASan build) can be checked after unmounting."""
import os
import subprocess
import tempfile
import threading
import time

from sqartest import is_mounted, sanitizer_problem, unmount_fuse


class ForegroundMount:
    """`with ForegroundMount([sqarfs, img, mnt, ...], mnt) as m:` -> m.mounted tells whether the
    mount came up; after the block m.returncode and m.stderr hold how the daemon ended."""

    def __init__(self, cmd, mnt, timeout=60):
        self.cmd, self.mnt, self.timeout = cmd + ["-f"], mnt, timeout
        self.returncode, self.stderr, self.mounted = None, "", False

    def __enter__(self):
        # stderr goes to a file, not a pipe: a pipe nobody drains fills up and blocks the daemon.
        self.errfile = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=self.errfile, text=True)
        deadline = time.monotonic() + self.timeout
        while not is_mounted(self.mnt):
            if self.proc.poll() is not None:  # refused the image: exited without mounting
                self.returncode, self.stderr = self.proc.returncode, self._read_stderr()
                return self
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"{self.cmd} did not mount within {self.timeout} s")
            time.sleep(0.005)
        self.mounted = True
        return self

    def __exit__(self, *exc):
        if not self.mounted:
            return False
        if is_mounted(self.mnt):
            unmount_fuse(self.mnt)
        try:
            self.proc.wait(timeout=self.timeout)
            self.stderr = self._read_stderr()
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.stderr = self._read_stderr() + f"\n(sqarfs did not exit within {self.timeout} s of the unmount)"
        self.returncode = self.proc.returncode
        return False

    def _read_stderr(self):
        self.errfile.seek(0)
        text = self.errfile.read()
        self.errfile.close()
        return text

    def problem(self):
        """Why the daemon's end is wrong, or None: a signal, a sanitizer report, or an exit code
        other than 0 (clean unmount) / 1 (image refused before mounting)."""
        if self.returncode is None or self.returncode < 0:
            return f"sqarfs ended with {self.returncode}: {self.stderr[-2000:]}"
        report = sanitizer_problem(self.cmd, self.returncode, self.stderr)
        if report:
            return report
        if self.returncode not in (0, 1) or (self.mounted and self.returncode != 0):
            return f"sqarfs exited {self.returncode}: {self.stderr[-1000:]}"
        return None


def abort_connection(mnt):
    """Aborts the FUSE connection behind mnt (fusectl), so processes blocked on a daemon that
    stopped answering get ENOTCONN instead of hanging the test forever. Returns success."""
    real = os.path.realpath(mnt)
    with open("/proc/self/mountinfo") as f:
        minors = [line.split()[2].split(":")[1] for line in f if line.split()[4] == real]
    if not minors:
        return False
    if not os.path.isdir("/sys/fs/fuse/connections/" + minors[-1]):
        subprocess.run(["mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"], stderr=subprocess.DEVNULL)
    try:
        with open(f"/sys/fs/fuse/connections/{minors[-1]}/abort", "w") as f:
            f.write("1")
        return True
    except OSError:
        return False


def run_with_deadline(fn, mnt, seconds):
    """Runs fn() in a thread; if it has not finished after `seconds` (a request sqarfs never
    answered), aborts the mount's FUSE connection and returns "hung", else fn's result."""
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("value", fn()), daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        abort_connection(mnt)
        t.join(30)
        return "hung"
    return result.get("value")
