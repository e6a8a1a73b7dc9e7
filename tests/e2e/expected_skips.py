"""The skips CI expects. CI runs as root on a machine prepared by scripts/install-deps.sh, so a
missing tool, missing root or a missing kernel driver there means the suite silently stopped
testing something: with CI=true in the environment, any skip whose reason matches none of the
patterns below fails the test instead. Each entry says why that skip is legitimate in CI."""
import os
import re

EXPECTED = [
    (r"stay in the page cache after POSIX_FADV_DONTNEED",
     "a tmpfs working directory cannot drop its pages, so there are no cold reads to test"),
    (r"the kernel does not offer NO_OPEN/NO_OPENDIR support",
     "older kernels lack FUSE_NO_OPEN_SUPPORT; the contents are still checked before the skip"),
    (r"O_TMPFILE works on the FUSE mount",
     "a FUSE stack that implements FUSE_TMPFILE leaves no filesystem here without O_TMPFILE"),
    (r"a sanitizer runtime cannot run with a tmpfs mounted over /proc",
     "only in the sanitizer stages, whose runtimes read /proc/self/maps; the normal stage runs the test"),
]


def in_ci():
    return os.environ.get("CI", "").lower() == "true"


def unexpected_in_ci(reason):
    """None if a skip for `reason` is acceptable here, else why it must fail."""
    if not in_ci():
        return None
    if any(re.search(pattern, reason) for pattern, _why in EXPECTED):
        return None
    return f"unexpected skip in CI (CI=true; see tests/e2e/expected_skips.py): {reason}"
