"""README command 1's tour (scripts/demo-tour.sh, which scripts/demo.sh runs after set-up) runs
with the binaries under test: it packs the bundled sample, mounts it with sqarfs, finds the mount
identical to the source, verifies the image and rebuilds it with --reuse compressing nothing.
It must exit 0 and leave no scratch directory behind. Needs root and /dev/fuse (the tour mounts);
without them it skips, saying why."""
import glob
import os
import re

from sqarfs_common import require_fuse, sqarfs_binary
from sqartest import SQAR, main, run

SOURCE_DIR = os.environ.get("SQAR_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def test_tour_runs_clean():
    require_fuse()
    env = dict(os.environ, SQAR=SQAR, SQARFS=sqarfs_binary())
    before = set(glob.glob("/tmp/sqar-demo.*"))
    p = run(["bash", os.path.join(SOURCE_DIR, "scripts", "demo-tour.sh")], check=False, env=env)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        raise AssertionError(f"demo-tour.sh exited {p.returncode}:\n{out[-3000:]}")
    for want in ("identical: every file and link matches", "unmounted", ": OK: "):
        if want not in out:
            raise AssertionError(f"the tour's output lacks {want!r}:\n{out[-3000:]}")
    rebuilt = re.search(r"blocks: (\d+) compressed.*\n\s*reused: (\d+) blocks", out)
    if not rebuilt:
        raise AssertionError(f"the --reuse rebuild printed no block counts:\n{out[-3000:]}")
    if int(rebuilt.group(1)) != 0 or int(rebuilt.group(2)) == 0:
        raise AssertionError(f"the --reuse rebuild compressed {rebuilt.group(1)} blocks and reused "
                             f"{rebuilt.group(2)}; expected 0 compressed and every block reused")
    left = set(glob.glob("/tmp/sqar-demo.*")) - before
    if left:
        raise AssertionError(f"the tour left {sorted(left)} behind")


if __name__ == "__main__":
    main([test_tour_runs_clean])
