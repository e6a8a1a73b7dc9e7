"""Shared pieces of the small benchmarks (extract_sparse.py, extract_tar.py): timing a
command, running the cases interleaved round-robin so a shared machine's noise hits all alike,
and writing the Markdown report."""
import os
import statistics
import subprocess
import time


def timed(cmd, shell=False):
    """Wall seconds of one run of cmd (output discarded; a failure raises)."""
    start = time.monotonic()
    subprocess.run(cmd, shell=shell, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


PEERS_RUN = "/work/peers-sid-run.sh"  # made by ../shared/bench/newest-peers.sh


def timed_chroot(binds, script, peers_run=PEERS_RUN):
    """Wall seconds of `script` run with sh in the newest peers' chroot, taken inside it, so
    the chroot's mount setup (~40 ms a call) is not counted; binds: host directories the
    script uses, mounted at the same paths."""
    wrapped = f"s=$(date +%s.%N); {{ {script}; }} >/dev/null 2>&1 || exit 9; e=$(date +%s.%N); echo $s $e"
    env = dict(os.environ, CHROOT_BIND=" ".join(binds))
    out = subprocess.run([peers_run, "sh", "-c", wrapped], check=True, stdout=subprocess.PIPE, env=env).stdout.split()
    return float(out[-1]) - float(out[-2])


def interleaved(cases, runs, before_each=None):
    """{name: [seconds per round]} for cases {name: fn returning seconds}, one round after
    another; before_each(name) runs untimed before each case (removing the last output)."""
    times = {name: [] for name in cases}
    for r in range(runs):
        for name, fn in cases.items():
            if before_each:
                before_each(name)
            times[name].append(fn())
        print(f"round {r + 1}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()), flush=True)
    return times


def medians(times):
    return {name: statistics.median(v) for name, v in times.items()}


def machine_line():
    """The machine and its load, which the report must state: the benchmark machine is shared."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"Machine: {os.cpu_count()} CPUs, load average {load} at the end (shared with other builds)."


def write_report(lines, out=None):
    """Prints the report and writes it to out if given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)


def add_ab_arguments(parser, repo_dir):
    """The options of the two-builds benchmarks (create_ab.py, diff_ab.py)."""
    parser.add_argument("--before", required=True, help="the sqar binary to compare against")
    parser.add_argument("--after", default=os.path.join(repo_dir, "build", "tools", "sqar"))
    parser.add_argument("--sets", default="ports,log")
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--gen-data")
    parser.add_argument("--out")


def ab_builds(args):
    """{"before": path, "after": path} of the two builds, as absolute paths."""
    return {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}

