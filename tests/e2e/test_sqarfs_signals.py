#!/usr/bin/env python3
"""A sqarfs daemon in the background ends on SIGTERM, SIGINT or SIGHUP and takes its mount
with it, whether the mount point was given as a relative or an absolute path. (The daemon
changes to / when it goes to the background; a relative mount point must not leave a dead
mount, "Transport endpoint is not connected", behind.)"""
import os
import signal
import subprocess
import sys
import time

from sqarfs_common import require_fuse, sqarfs_binary
from sqartest import exit_status, mksquashfs, tempdir, unmount_fuse


def mounts_of(mnt, image):
    """Lines of /proc/self/mountinfo for mount point mnt or with source image."""
    real_mnt, real_img = os.path.realpath(mnt), os.path.realpath(image)
    with open("/proc/self/mountinfo") as f:
        lines = f.read().splitlines()
    found = []
    for line in lines:
        fields = line.split()
        source = fields[fields.index("-") + 2]
        if fields[4] == real_mnt or source == real_img:
            found.append(line)
    return found


def daemon_pid(sqarfs, image_arg):
    """The sqarfs process started with this image argument (unique per case), or None."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and argv[0] == sqarfs and image_arg in argv[1:]:
            return int(pid)
    return None


def alive(pid):
    """Running (a zombie nobody reaps, as in a container without init, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check_case(sqarfs, tmp, sig, relative):
    kind = "relative" if relative else "absolute"
    label = f"{sig.name}, {kind} mount point"
    name = f"{sig.name}-{kind}"
    os.link(f"{tmp}/img.sqfs", f"{tmp}/{name}.sqfs")
    os.makedirs(f"{tmp}/mnt/{name}")
    image_arg = f"{name}.sqfs" if relative else f"{tmp}/{name}.sqfs"
    mnt_arg = f"mnt/{name}" if relative else f"{tmp}/mnt/{name}"
    mnt, image = f"{tmp}/mnt/{name}", f"{tmp}/{name}.sqfs"
    r = subprocess.run([sqarfs, image_arg, mnt_arg], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=60)
    if r.returncode != 0:
        return [f"{label}: sqarfs failed ({r.returncode}): {r.stderr.strip()}"]
    problems = []
    try:
        if not mounts_of(mnt, image):
            return [f"{label}: sqarfs exited 0 but nothing is mounted"]
        with open(f"{mnt}/hello") as f:
            if f.read() != "hello\n":
                problems.append(f"{label}: wrong content before the signal")
        pid = daemon_pid(sqarfs, image_arg)
        if pid is None:
            return problems + [f"{label}: no sqarfs daemon found for {image_arg}"]
        os.kill(pid, sig)
        deadline = time.monotonic() + 20
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if alive(pid):
            problems.append(f"{label}: the daemon still runs 20 s after the signal")
        left = mounts_of(mnt, image)
        if left:
            problems.append(f"{label}: mount left behind: {left[0]}")
        else:
            print(f"{label}: daemon gone, nothing mounted")
    finally:
        if mounts_of(mnt, image):
            unmount_fuse(mnt)
    return problems


def main():
    require_fuse()
    sqarfs = os.path.abspath(sqarfs_binary())
    problems = []
    with tempdir() as tmp:
        os.makedirs(f"{tmp}/src")
        with open(f"{tmp}/src/hello", "w") as f:
            f.write("hello\n")
        mksquashfs(f"{tmp}/src", f"{tmp}/img.sqfs")
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            for relative in (True, False):
                problems += check_case(sqarfs, tmp, sig, relative)
    return exit_status(problems)


if __name__ == "__main__":
    sys.exit(main())
