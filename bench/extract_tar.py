#!/usr/bin/env python3
"""`sqar extract --tar` against the peers that turn an image into a tar: sqfs2tar
(squashfs-tools-ng) and `unsquashfs` followed by `tar -c`. The peers are the newest, from the
Debian sid chroot of ../shared/bench/newest-peers.sh (timed inside it), or with --host-peers the
machine's own. One image of the ports set (made by
sqar create, zstd), every tool writing an uncompressed tar into the work directory; runs
interleaved round-robin so the noise of a shared machine hits all alike; medians printed and
written as a Markdown table. Warm page cache (the image is read once before the runs).

    python3 bench/extract_tar.py --scale 0.1 --runs 3 [--sqar build/tools/sqar] [--work /tmp/x] \
        [--set ports|log] [--comp zstd|gzip|xz...] [--also OTHER_SQAR] [--tar-compress zstd|gzip|xz] \
        [--out bench/results/2026-11-25-extract-tar.md]

--tar-compress writes a compressed archive: sqar by the archive's suffix (libarchive's filter),
the peers through the compressor's own CLI in a pipe at the same level (zstd -3 -T2, gzip -6,
xz -6 -T2), which then runs beside them on the other core; for gzip also `sqfs2tar | pigz -6 -p 2`.

--also times a second sqar binary in the same rounds (e.g. the build before a change).
"""
import argparse
import os
import shutil
import subprocess
import sys
import statistics
import tempfile

from benchlib import PEERS_RUN, interleaved, machine_line, medians, timed, timed_chroot, write_report

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def tar_names(path):
    """Entry names as GNU tar lists them, without './' prefixes and trailing '/'."""
    out = sh(["tar", "-tf", path], stdout=subprocess.PIPE).stdout.decode("utf-8", "surrogateescape")
    names = set()
    for n in out.splitlines():
        n = n[2:] if n.startswith("./") else n
        n = n.rstrip("/")
        if n and n != ".":
            names.add(n)
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sqar", default=os.path.join(HERE, "..", "build", "tools", "sqar"))
    default_gen = "/work/shared/bench/gen_data.py"
    ap.add_argument("--gen-data", default=default_gen if os.path.exists(default_gen) else os.path.join(HERE, "gen_data.py"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--set", default="ports", choices=("ports", "log"))
    ap.add_argument("--comp", default="zstd")
    ap.add_argument("--also", default=None, help="another sqar binary timed alongside")
    ap.add_argument("--host-peers", action="store_true", help="the machine's sqfs2tar and unsquashfs, not the newest")
    ap.add_argument("--tar-compress", default="none", choices=("none", "zstd", "gzip", "xz"))
    args = ap.parse_args()
    if args.host_peers:
        for tool in ("sqfs2tar", "unsquashfs", "tar"):
            if not shutil.which(tool):
                sys.exit(f"{tool} is not installed")
    elif not os.path.exists(PEERS_RUN):
        sys.exit(f"{PEERS_RUN} is missing: build the newest peers with ../shared/bench/newest-peers.sh (or --host-peers)")
    work = args.work or tempfile.mkdtemp(prefix="sqar-bench-tar-")
    data = os.path.join(work, "data")
    if not os.path.isdir(os.path.join(data, args.set)):
        sh([sys.executable, args.gen_data, data, "--scale", str(args.scale), "--only", args.set])
    src = os.path.join(data, args.set)
    image = os.path.join(work, f"{args.set}-{args.comp}.sqfs")
    if not os.path.exists(image):
        sh([args.sqar, "create", "-q", "-c", args.comp, src, image])
    sh(["cat", image], stdout=subprocess.DEVNULL)  # warm cache for every tool alike

    names = ("sqar", "sqar (--also)", "sqfs2tar", "unsquashfs+tar") if args.also else ("sqar", "sqfs2tar", "unsquashfs+tar")
    suffix, pipe = {"none": ("tar", ""), "zstd": ("tar.zst", " | zstd -q -3 -T2"),
                    "gzip": ("tar.gz", " | gzip -6"), "xz": ("tar.xz", " | xz -6 -T2")}[args.tar_compress]
    # gzip: also pigz, the parallel gzip a user would pipe into on a multi-core machine.
    with_pigz = args.tar_compress == "gzip" and (not args.host_peers or shutil.which("pigz"))
    if with_pigz:
        names += ("sqfs2tar+pigz",)
    out = {name: os.path.join(work, f"{name.split()[0] + ('-also' if '--also' in name else '')}.{suffix}")
           for name in names}
    scratch = os.path.join(work, "unsquashfs-tree")
    def peer(script):
        if args.host_peers:
            return timed(script, shell=True)
        return timed_chroot([work], script)

    tools = {
        "sqar": lambda: timed([args.sqar, "extract", "--tar", out["sqar"], image]),
        "sqar (--also)": lambda: timed([args.also, "extract", "--tar", out["sqar (--also)"], image]),
        "sqfs2tar": lambda: peer(f"sqfs2tar --no-skip {image!r}{pipe} > {out['sqfs2tar']!r}"),
        # The scratch tree is removed before the clock starts (as each tool's output is).
        "unsquashfs+tar": lambda: peer(f"unsquashfs -q -n -d {scratch!r} {image!r} >/dev/null "
                                       f"&& tar -C {scratch!r} -cf - .{pipe} > {out['unsquashfs+tar']!r}"),
    }
    if with_pigz:
        tools["sqfs2tar+pigz"] = lambda: peer(f"sqfs2tar --no-skip {image!r} | pigz -6 -p 2 > {out['sqfs2tar+pigz']!r}")
    if not args.also:
        del tools["sqar (--also)"]
    def before_each(name):
        if os.path.exists(out[name]):
            os.unlink(out[name])
        shutil.rmtree(scratch, ignore_errors=True)

    times = interleaved(tools, args.runs, before_each)

    # Every archive must hold the same entries (sqar leaves out the root, the others hold './').
    ref = tar_names(out["unsquashfs+tar"])
    for name in [n for n in tools if n != "unsquashfs+tar"]:
        got = tar_names(out[name])
        if got != ref:
            sys.exit(f"{name}: archive entries differ from unsquashfs+tar: {len(got ^ ref)} names")
    med = medians(times)
    if args.host_peers:
        peers_line = "Peers: this machine's sqfs2tar and unsquashfs (`--host-peers`)."
    else:
        versions = subprocess.run([PEERS_RUN, "dpkg-query", "-W", "squashfs-tools", "squashfs-tools-ng", "tar"],
                                  check=True, stdout=subprocess.PIPE, text=True).stdout.split("\n")
        peers_line = ("Peers, newest (Debian sid chroot, timed inside it): " +
                      ", ".join(" ".join(v.split()) for v in versions if v.strip()) + ".")
    files = sum(len(f) for _, _, f in os.walk(src))
    lines = [
        f"# extract --tar, {args.set} set (scale {args.scale}: {files} files, {args.comp} image "
        f"{os.path.getsize(image) / 1e6:.1f} MB)",
        "",
        machine_line(),
        peers_line,
        f"Medians of {args.runs} interleaved runs, warm page cache, "
        + ("uncompressed tar" if args.tar_compress == "none" else f"{args.tar_compress} tar ({pipe.strip(' |')} for the peers)")
        + " written to the",
        "same filesystem as the image. All archives hold the same entries (checked).",
        "",
        "| tool | wall (s) | vs sqar | archive (MB) |",
        "|---|---|---|---|",
    ]
    for n in tools:
        lines.append(f"| {n} | {med[n]:.2f} | {med[n] / med['sqar']:.2f}x | {os.path.getsize(out[n]) / 1e6:.1f} |")
    lines += ["", "Per-round ratios sqar / peer (median): " + ", ".join(
        f"{n} {statistics.median(a / b for a, b in zip(times['sqar'], times[n])):.2f}x" for n in tools if n != "sqar")]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
