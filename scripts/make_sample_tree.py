#!/usr/bin/env python3
"""Builds the demo's bundled sample tree: the kinds of input sqar is made for, small enough to
pack in seconds. logs with a rotated copy, two releases of a source tree (sqar's own), duplicated
media, a database dump, plus a symlink and a hard link.

Usage: make_sample_tree.py OUTDIR
"""
import argparse
import os
import random
import shutil
import sys


def gen_log(path, size, seed):
    rnd = random.Random(seed)
    paths = ["/api/v1/orders", "/api/v1/users", "/static/app.js", "/health", "/login", "/search"]
    t = 1_700_000_000
    with open(path, "w") as f:
        written = 0
        while written < size:
            t += rnd.randrange(1, 40)
            line = (f"2026-11-{t // 86400 % 28 + 1:02d}T{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}Z "
                    f"web-{rnd.randrange(8):02d} {rnd.choice(['INFO'] * 8 + ['WARN', 'ERROR'])} "
                    f"GET {rnd.choice(paths)}?id={rnd.randrange(100000)} {rnd.choice([200, 200, 304, 404, 500])} "
                    f"{rnd.randrange(1, 900)}ms\n")
            f.write(line)
            written += len(line)


def main():
    parser = argparse.ArgumentParser(description="Builds the demo's sample tree in OUTDIR (a new or empty directory).")
    parser.add_argument("outdir", metavar="OUTDIR")
    out = parser.parse_args().outdir
    # Never a directory that holds anything: the tree is written over whatever is there.
    if os.path.lexists(out) and (not os.path.isdir(out) or os.path.islink(out) or os.listdir(out)):
        sys.exit(f"make_sample_tree.py: {out}: exists and is not an empty directory; give a new one")
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    os.makedirs(f"{out}/logs/archive")
    gen_log(f"{out}/logs/app.log", 24 << 20, 1)
    gen_log(f"{out}/logs/worker.log", 6 << 20, 2)
    shutil.copy2(f"{out}/logs/app.log", f"{out}/logs/archive/app.log.1")  # a rotated copy: deduplicated
    for release in ("release-1.0", "release-1.1"):
        for part in ("src", "tools", "fuse"):
            shutil.copytree(os.path.join(repo, part), f"{out}/source/{release}/{part}")
    rnd = random.Random(3)
    clip = rnd.randbytes(8 << 20)  # incompressible, like video: stored raw, once
    os.makedirs(f"{out}/media")
    for name in ("holiday.mp4", "holiday-copy.mp4", "backup/holiday.mp4"):
        os.makedirs(os.path.dirname(f"{out}/media/{name}"), exist_ok=True)
        with open(f"{out}/media/{name}", "wb") as f:
            f.write(clip)
    os.makedirs(f"{out}/db")
    with open(f"{out}/db/dump.sql", "w") as f:
        f.write("CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, total NUMERIC, note TEXT);\n")
        for i in range(120_000):
            f.write(f"INSERT INTO orders VALUES ({i}, {rnd.randrange(5000)}, {rnd.randrange(100000) / 100}, "
                    f"'order {i} from the demo');\n")
    os.symlink("logs/app.log", f"{out}/latest.log")
    os.link(f"{out}/db/dump.sql", f"{out}/db/dump-hardlink.sql")
    with open(f"{out}/README.txt", "w") as f:
        f.write("A sample tree packed by `sqar create` in the demo.\n")


if __name__ == "__main__":
    main()
