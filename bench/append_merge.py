#!/usr/bin/env python3
"""sqar benchmark: `append` and `merge`, which copy stored blocks instead of compressing again.

    python3 bench/append_merge.py [--log-scale 0.3] [--ports-scale 0.5] [--runs 5] [--level 15]
                                  [--dir DIR] [--out FILE]

append: an image of the log set (../shared/bench/gen_data.py, zstd-LEVEL, 128 KiB blocks) gets
1% new logs. Each round, interleaved: `cp` of the old image (the copy append is measured
against), `sqar append` (on a fresh copy of the old image, made untimed), and `sqar create` of
the whole new tree at zstd-LEVEL (what a rebuild costs). `append --tar` adds the same new logs
from a tar file.
merge: three shard images of the ports set (ports-1, ports-2, ports-3, each under its own name)
joined by `sqar merge`, against `cp` of the three shards; and again with the third shard made
at gzip-9, which merge decodes and compresses again.
recode: an image of the log set made by mksquashfs at gzip-9 (content no other input holds)
merged alone into zstd-LEVEL, so every file is decoded, checked and compressed again, against
`sqar create` of the log directory at zstd-LEVEL.
--dir puts the images on another filesystem (an XFS with reflink=1 shows copy_file_range
sharing extents). Medians of per-round ratios. A benchmark, not a test: it never fails on speed.
"""
import argparse
import datetime
import importlib.util
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402


def load_gen_data(path):
    spec = importlib.util.spec_from_file_location("gen_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def remove(path):
    if os.path.lexists(path):
        os.remove(path)


def fs_type(path):
    return subprocess.run(["stat", "-f", "-c", "%T", path], stdout=subprocess.PIPE, text=True).stdout.strip()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log-scale", type=float, default=0.3)
    p.add_argument("--ports-scale", type=float, default=0.5)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--level", type=int, default=15)
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    p.add_argument("--dir", help="where images are written (default bench/work/append-merge)")
    p.add_argument("--sqar")
    p.add_argument("--gen-data")
    p.add_argument("--out")
    args = p.parse_args()
    args.sqarfs = None
    tools = bench.Tools(args)
    gen_path = bench.find_gen_data(args)
    logs = bench.ensure_data("log", args.log_scale, gen_path)
    ports = bench.ensure_data("ports", args.ports_scale, gen_path)
    work = args.dir or os.path.join(bench.WORK_DIR, "append-merge")
    os.makedirs(work, exist_ok=True)
    codec = ["-c", "zstd", "-l", str(args.level), "-b", str(bench.BLOCK_SIZE), "-j", str(args.jobs)]
    sqar = tools.sqar

    # append: 1% new logs in their own directory; the fresh build packs logs + new logs
    new = os.path.join(bench.WORK_DIR, "append-new-logs")
    bench.rmtree(new)
    log_bytes = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(logs) for f in fs)
    gen = load_gen_data(gen_path)
    os.makedirs(os.path.join(new, "rotated"))
    gen.gen_log(os.path.join(new, "rotated", "day-2.log"), log_bytes // 100, seed=4242)
    new_bytes = os.path.getsize(os.path.join(new, "rotated", "day-2.log"))
    whole = os.path.join(bench.WORK_DIR, "append-whole")
    bench.rmtree(whole)
    shutil.copytree(logs, whole, copy_function=os.link)
    shutil.copytree(os.path.join(new, "rotated"), os.path.join(whole, "rotated"), copy_function=os.link)
    old = os.path.join(work, "old.sqfs")
    bench.log("building the log image ...")
    bench.run_measured([sqar, "create", "-q", "--force", *codec, logs, old], 3600)
    target = os.path.join(work, "appended.sqfs")
    copy = os.path.join(work, "copy.sqfs")
    fresh = os.path.join(work, "fresh.sqfs")
    # checked run: the appended image holds exactly the whole tree
    shutil.copyfile(old, target)
    stats = json.loads(bench.run_quiet([sqar, "append", "--json", target, new]))
    bench.check_output(tools, target, bench.describe_tree(whole), os.path.join(bench.WORK_DIR, "append-check"), 3600)
    new_tar = os.path.join(work, "new-logs.tar")
    subprocess.run(["tar", "-C", new, "-cf", new_tar, "."], check=True)
    shutil.copyfile(old, target)
    bench.run_quiet([sqar, "append", "--json", "--tar", new_tar, target])
    bench.check_output(tools, target, bench.describe_tree(whole), os.path.join(bench.WORK_DIR, "append-check"), 3600)

    # merge: three shards
    shards = []
    for i in (1, 2, 3):
        s = os.path.join(work, f"shard-{i}.sqfs")
        bench.run_measured([sqar, "create", "-q", "--force", "--keep-as-directory", *codec,
                            os.path.join(ports, f"ports-{i}"), s], 3600)
        shards.append(s)
    merged = os.path.join(work, "merged.sqfs")
    copies = os.path.join(work, "shard-copies")
    os.makedirs(copies, exist_ok=True)
    remove(merged)
    mstats = json.loads(bench.run_quiet([sqar, "merge", "--json", "--force", *shards, merged]))
    bench.check_output(tools, merged, bench.describe_tree(ports), os.path.join(bench.WORK_DIR, "merge-check"), 3600)
    gzip_shard = os.path.join(work, "shard-3-gzip.sqfs")
    bench.run_measured([sqar, "create", "-q", "--force", "--keep-as-directory", "-c", "gzip", "-l", "9",
                        "-j", str(args.jobs), os.path.join(ports, "ports-3"), gzip_shard], 3600)
    mixed = [shards[0], shards[1], gzip_shard]
    remove(merged)
    # the JSON summary is the last line, after the warning that names the recoded shard
    rstats = json.loads(bench.run_quiet([sqar, "merge", "--json", "--force", *mixed, merged]).splitlines()[-1])
    bench.check_output(tools, merged, bench.describe_tree(ports), os.path.join(bench.WORK_DIR, "merge-check"), 3600)

    # recode: a gzip-9 image of the logs by mksquashfs, recoded whole into zstd-LEVEL
    logs_gzip = os.path.join(work, "logs-gzip.sqfs")
    remove(logs_gzip)
    bench.run_measured(["mksquashfs", logs, logs_gzip, "-comp", "gzip", "-Xcompression-level", "9", "-b",
                        str(bench.BLOCK_SIZE), "-noappend", "-no-progress", "-quiet"], 3600)
    recoded = os.path.join(work, "logs-recoded.sqfs")
    logs_fresh = os.path.join(work, "logs-fresh.sqfs")
    remove(recoded)
    recode_args = [sqar, "merge", "--json", "--force", "-c", "zstd", "-l", str(args.level), "-j", str(args.jobs),
                   logs_gzip, recoded]
    cstats = json.loads(bench.run_quiet(recode_args).splitlines()[-1])
    bench.check_output(tools, recoded, bench.describe_tree(logs), os.path.join(bench.WORK_DIR, "merge-check"), 3600)

    rows = {k: [] for k in ("cp", "cp + sync", "append", "append: old data", "append --tar", "create", "cp shards",
                            "merge", "merge: inputs read", "merge, one shard recoded", "create of the logs",
                            "merge recoding the gzip logs", "recode: inputs read and checked")}
    for r in range(args.runs):
        bench.log(f"round {r + 1}/{args.runs}")
        remove(copy)
        rows["cp"].append(bench.run_measured(["cp", old, copy], 600).wall)
        remove(copy)
        rows["cp + sync"].append(bench.run_measured(["sh", "-c", f"cp {old} {copy} && sync {copy}"], 600).wall)
        shutil.copyfile(old, target)
        subprocess.run(["sync"])
        m = bench.run_measured([sqar, "append", "--json", "-j", str(args.jobs), target, new], 600)
        rows["append"].append(m.wall)
        j = json.loads(m.stdout)
        rows["append: old data"].append(j["load_seconds"] + j["copy_seconds"])
        shutil.copyfile(old, target)
        subprocess.run(["sync"])
        rows["append --tar"].append(
            bench.run_measured([sqar, "append", "--json", "-j", str(args.jobs), "--tar", new_tar, target], 600).wall)
        rows["create"].append(bench.run_measured([sqar, "create", "-q", "--force", *codec, whole, fresh], 3600).wall)
        for s in shards:
            remove(os.path.join(copies, os.path.basename(s)))
        rows["cp shards"].append(bench.run_measured(["cp", *shards, copies], 600).wall)
        m = bench.run_measured([sqar, "merge", "--json", "--force", *shards, merged], 600)
        rows["merge"].append(m.wall)
        rows["merge: inputs read"].append(json.loads(m.stdout)["load_seconds"])
        rows["merge, one shard recoded"].append(
            bench.run_measured([sqar, "merge", "--json", "--force", *mixed, merged], 600).wall)
        rows["create of the logs"].append(
            bench.run_measured([sqar, "create", "-q", "--force", *codec, logs, logs_fresh], 3600).wall)
        m = bench.run_measured(recode_args, 3600)
        rows["merge recoding the gzip logs"].append(m.wall)
        rows["recode: inputs read and checked"].append(json.loads(m.stdout.splitlines()[-1])["load_seconds"])
        subprocess.run(["sync"])

    def ratio(a, b):
        return bench.med([x / y for x, y in zip(rows[a], rows[b])])

    med = {k: bench.med(v) for k, v in rows.items()}
    load = os.getloadavg()
    lines = [f"# sqar benchmark: append and merge, {datetime.date.today()}", "",
             f"Command: `python3 bench/append_merge.py --log-scale {args.log_scale:g} --ports-scale "
             f"{args.ports_scale:g} --runs {args.runs} --level {args.level}"
             + (f" --dir {args.dir}" if args.dir else "") + "`", "",
             bench.machine_description(tools), "",
             f"Images on {fs_type(work)}. The machine was shared with other builds (load average "
             f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end). zstd-{args.level}, 128 KiB blocks, "
             f"{args.jobs} threads, warm page cache. Medians of {args.runs} interleaved rounds.", "",
             f"append: log image {os.path.getsize(old) / 2**20:.1f} MiB ({log_bytes / 2**20:.0f} MiB of logs), "
             f"{new_bytes / 2**20:.1f} MiB of new logs (1%). Checked: the appended image read back by unsquashfs "
             f"equals the whole tree; append copied {stats['copied_bytes'] / 2**20:.1f} MiB "
             f"({stats['shared_bytes'] / 2**20:.1f} MiB through copy_file_range), hashed "
             f"{stats['checked_bytes'] / 2**20:.1f} MiB against the data digests, decoded "
             f"{stats['decoded_bytes'] / 2**10:.0f} KiB, compressed {stats['blocks_compressed']} new blocks.", "",
             "| step | wall s (median) |", "|---|---:|"]
    for k in rows:
        lines.append(f"| {k} | {med[k]:.3f} |")
    lines += ["", "| ratio (median of per-round ratios) | value | target |", "|---|---:|---:|",
              f"| append / create at zstd-{args.level} | {ratio('append', 'create'):.3f} | ≤ 0.1 |",
              f"| append / cp of the old image | {ratio('append', 'cp'):.2f} | ≤ 1.2 |",
              f"| append / (cp + sync) | {ratio('append', 'cp + sync'):.2f} | |",
              f"| append's old-data part (read, check, copy) / cp | {ratio('append: old data', 'cp'):.2f} | |",
              f"| append --tar / create at zstd-{args.level} | {ratio('append --tar', 'create'):.3f} | |",
              f"| append --tar / append of the same files | {ratio('append --tar', 'append'):.2f} | |",
              f"| merge of 3 ports shards / cp of the shards | {ratio('merge', 'cp shards'):.2f} | ≤ 1.2 |",
              f"| merge with the third shard at gzip-9 (recoded) / merge | {ratio('merge, one shard recoded', 'merge'):.2f} | |",
              f"| merge recoding the gzip-9 log image / create of the logs at zstd-{args.level} | "
              f"{ratio('merge recoding the gzip logs', 'create of the logs'):.2f} | |",
              f"| its decode-and-check pass / create of the logs | "
              f"{ratio('recode: inputs read and checked', 'create of the logs'):.3f} | |",
              "",
              f"merge: shards of {', '.join(f'{os.path.getsize(s) / 2**20:.1f}' for s in shards)} MiB -> "
              f"{os.path.getsize(merged) / 2**20:.1f} MiB; {mstats['duplicate_files']} files held by an earlier shard "
              f"were not copied (the ports set's three trees are copies of each other), and {mstats['fragments']} "
              f"fragment blocks were kept (blocks whose tails all belong to an earlier shard are left out); unsquashfs of the result equals the ports tree. With the third shard at gzip-9, "
              f"merge recoded {rstats['recoded_files']} files ({rstats['recoded_bytes'] / 2**20:.1f} MiB) and "
              f"compressed {rstats['new_bytes_in'] / 2**20:.1f} MiB of them (the rest were duplicates of the "
              f"copied shards); its result equals the ports tree too. `append --tar` of the new logs was checked "
              f"the same way.", "",
              f"recode: mksquashfs's gzip-9 image of the logs ({os.path.getsize(logs_gzip) / 2**20:.1f} MiB) merged "
              f"into zstd-{args.level}: {cstats['recoded_files']} files ({cstats['recoded_bytes'] / 2**20:.1f} MiB) "
              f"decoded and checked, {cstats['new_bytes_in'] / 2**20:.1f} MiB compressed; the result "
              f"({os.path.getsize(recoded) / 2**20:.1f} MiB) read back by unsquashfs equals the log tree.", "",
              "Per-round wall times (s): " + "; ".join(f"{k}: " + ", ".join(f"{x:.3f}" for x in v)
                                                       for k, v in rows.items())]
    report = "\n".join(lines) + "\n"
    out = args.out or os.path.join(bench.RESULTS_DIR, f"{datetime.date.today()}-append-merge.md")
    with open(out, "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
