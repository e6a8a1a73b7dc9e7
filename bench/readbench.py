#!/usr/bin/env python3
"""Focused read-side benchmark: sqarfs (one or more builds/options) against the kernel driver and
squashfuse on the same image, plus sqar extract against unsquashfs. For tuning, not for reports
(bench/run.py writes those).

    python3 bench/readbench.py --sets ports,log --scale 0.3 --runs 3 \
        [--reader sqarfs-old=build-cli/fuse/sqarfs] [--reader 'sqarfs-big=build-perf/fuse/sqarfs -o cache=256M'] \
        [--ops 'mount,read all,random 4K,walk+lstat,extract'] [--image IMAGE --src TREE]

--image takes an existing image (one made by mksquashfs, say) instead of the data sets; --src is
the tree it was made from (the read lists come from it).

A reader given as NAME=chroot:COMMAND runs inside the newest peers' Debian sid chroot
(../shared/bench/newest-peers.sh; squashfuse_ll 0.5.x there): the mount point is then made
inside the chroot's root, where the host sees the mount too, and the image's directory is
bound into it. Its mount time includes entering the chroot (~40 ms); the reads do not.

Readers default to kernel, squashfuse_ll and sqarfs (build-perf). Every operation runs on a fresh
mount after dropping caches (as in run.py); runs are interleaved round-robin across readers so the
noise of a shared 2-core machine hits all alike. Prints medians and ratios to the kernel, to
squashfuse_ll and to unsquashfs.
"""
import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the shared helpers: data sets, drop_caches, randread, mount_op)

READ_OPS = ["read all", "random 4K", "walk+lstat"]


PEERS_RUN = "/work/peers-sid-run.sh"  # made by ../shared/bench/newest-peers.sh
PEERS_ROOT = "/work/peers-sid"
CHROOT = "chroot:"


class Mount(run.Mounted):
    """run.Mounted with a free command line (several sqarfs builds or options side by side)."""

    def __init__(self, name, cmd, image, mnt):
        self.reader, self.mnt, self.pid = ("kernel" if cmd is None else name), mnt, None
        env = None
        if cmd is None:
            full = ["mount", "-t", "squashfs", "-o", "loop,ro", image, mnt]
        elif cmd[0].startswith(CHROOT):
            # Inside the chroot the mount point is mnt without the chroot's root (main() puts it there).
            full = [PEERS_RUN, cmd[0][len(CHROOT):], image, mnt[len(PEERS_ROOT):]] + cmd[1:]
            env = dict(os.environ, CHROOT_BIND=os.path.dirname(image))
        else:
            full = cmd[:1] + [image, mnt] + cmd[1:]
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     env=env)
        while not os.path.ismount(mnt):
            rc = self.proc.poll()
            if rc not in (None, 0):
                raise run.StepFailed(f"{name}: mount failed: {self.proc.stderr.read().decode()[-300:]}")
            if time.perf_counter() - t0 > 30:
                self.close()
                raise run.StepFailed(f"{name}: mount timed out")
            time.sleep(0.001)
        self.mount_time = time.perf_counter() - t0


def make_image(sqar, src, image):
    if not os.path.exists(image) or os.path.getmtime(image) < os.path.getmtime(src):
        run.log(f"creating {image} ...")
        subprocess.run([sqar, "create", "-c", "zstd", "-l", "3", "-b", str(run.BLOCK_SIZE), "--force", "--quiet",
                        src, image], check=True)
    return image


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", default="ports,log")
    p.add_argument("--scale", type=float, default=0.3)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    p.add_argument("--rand-seconds", type=float, default=3.0)
    p.add_argument("--ops", default="mount,read all,random 4K,walk+lstat,extract")
    p.add_argument("--sqar", default=os.path.join(run.REPO_DIR, "build-perf", "tools", "sqar"))
    p.add_argument("--reader", action="append", default=[],
                   help="NAME=COMMAND (kernel, squashfuse, squashfuse_ll need no command)")
    p.add_argument("--extractor", action="append", default=[], help="NAME=COMMAND (gets IMAGE -C DEST appended)")
    p.add_argument("--image", default=None, help="an existing image, read instead of the data sets")
    p.add_argument("--src", default=None, help="the tree --image was made from")
    args = p.parse_args()
    if bool(args.image) != bool(args.src):
        p.error("--image and --src go together")
    ops = [o.strip() for o in args.ops.split(",")]
    readers = {}
    for spec in args.reader or ["kernel", "squashfuse_ll", "sqarfs=" + os.path.join(run.REPO_DIR, "build-perf/fuse/sqarfs")]:
        name, _, cmd = spec.partition("=")
        readers[name] = None if name == "kernel" else shlex.split(cmd or shutil.which(name))
    in_chroot = any(cmd and cmd[0].startswith(CHROOT) for cmd in readers.values())
    extractors = {"unsquashfs": None}
    for spec in args.extractor or ["sqar=" + args.sqar + " extract"]:
        name, _, cmd = spec.partition("=")
        extractors[name] = shlex.split(cmd)

    gen_data = run.find_gen_data(argparse.Namespace(gen_data=None))
    tools = run.Tools(argparse.Namespace(sqar=args.sqar, sqarfs=None))
    os.makedirs(run.WORK_DIR, exist_ok=True)  # the helper is built there
    helper = run.build_helper("randread", [], tools)
    mode = {"rand_seconds": args.rand_seconds, "timeout": 1800}
    work = os.path.join(run.WORK_DIR, "readbench")
    os.makedirs(work, exist_ok=True)
    for name in [os.path.basename(args.image)] if args.image else args.sets.split(","):
        if args.image:
            src, image = args.src, args.image
        else:
            src = run.ensure_data(name, args.scale, gen_data)
            image = make_image(args.sqar, src, os.path.join(work, f"{name}-{args.scale:g}.sqfs"))
        ds = argparse.Namespace(name="readbench", reference=run.describe_tree(src))
        # A chroot reader's mount is seen by the host only inside the chroot's root, so every
        # reader mounts there then (one mount point keeps the read lists the same for all).
        mnt = os.path.join(PEERS_ROOT, "readbench-mnt") if in_chroot else os.path.join(work, "mnt")
        os.makedirs(mnt, exist_ok=True)
        all_list, rand_list = run.write_lists(ds, mnt)
        res = {}
        for r in range(args.runs):
            for op in ops:
                if op == "extract":
                    # A tmpfs: on ext4, creating files within ~30 s of deleting 100k others scans the
                    # recently deleted inodes (recently_deleted() was 80% of unsquashfs' time here).
                    tmp = os.path.join(work, "tmpfs")
                    os.makedirs(tmp, exist_ok=True)
                    if not os.path.ismount(tmp):
                        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4g", "tmpfs", tmp], check=True)
                    dest = os.path.join(tmp, "out")
                    for ename, cmd in extractors.items():
                        run.rmtree(dest)
                        os.sync()
                        full = (["unsquashfs", "-d", dest, "-p", str(args.jobs), "-q", "-n", image] if cmd is None
                                else cmd + ["-j", str(args.jobs), image, "-C", dest])
                        m = run.run_measured(full, 1800)
                        res.setdefault((ename, op), []).append(m.wall)
                        run.log(f"[{name}] {ename} extract: {m.wall:.3f}")
                    run.rmtree(dest)
                    continue
                for rname, cmd in readers.items():
                    m = Mount(rname, cmd, image, mnt)
                    try:
                        if op == "mount":
                            value = m.mount_time
                        else:
                            run.drop_caches()
                            value = run.mount_op(op, mnt, helper, all_list, rand_list, args, mode)
                            if isinstance(value, dict):  # random 4K: reads/s, also with the opens
                                value = value[op]
                    finally:
                        m.close()
                    res.setdefault((rname, op), []).append(value)
                    run.log(f"[{name}] {rname} {op}: {value:.4f}")
        print(f"\n## {name} scale {args.scale:g} ({args.runs} runs, medians)")
        names = list(readers) + list(extractors)
        for op in ops:
            row = [n for n in names if (n, op) in res]
            base = {b: statistics.median(res[(b, op)]) for b in ("kernel", "squashfuse_ll", "unsquashfs") if (b, op) in res}
            for n in row:
                v = statistics.median(res[(n, op)])
                ratios = " ".join(f"{v / b:.2f}x {k}" for k, b in base.items() if k != n and b)
                print(f"{op:12s} {n:16s} {v:10.4f}   {ratios}")


if __name__ == "__main__":
    try:
        main()
    finally:
        tmp = os.path.join(run.WORK_DIR, "readbench", "tmpfs")
        if os.path.ismount(tmp):
            subprocess.run(["umount", tmp], check=False)
