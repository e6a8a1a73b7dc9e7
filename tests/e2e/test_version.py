"""`sqar --version`, `sqar -V` and `sqarfs --version` report the version of project(VERSION) in
CMakeLists.txt, the one place it is set."""
import os
import re

from sqartest import SQAR, SQARFS, main, run

SOURCE_DIR = os.environ.get("SQAR_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def project_version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        m = re.search(r"^project\(\s*sqar\s+VERSION\s+([0-9][0-9.]*)", f.read(), re.M)
    if not m:
        raise AssertionError("no project(sqar VERSION ...) in CMakeLists.txt")
    return m.group(1)


def expect_version_line(cmd, program):
    version = project_version()
    p = run(cmd)
    first = p.stdout.splitlines()[0] if p.stdout else ""
    if not re.fullmatch(re.escape(program) + r" " + re.escape(version) + r"( .*)?", first):
        raise AssertionError(f"{cmd} printed {first!r}, expected '{program} {version}'")


def test_sqar_version():
    expect_version_line([SQAR, "--version"], "sqar")


def test_sqar_short_version():
    expect_version_line([SQAR, "-V"], "sqar")


def test_sqarfs_version():
    expect_version_line([SQARFS, "--version"], "sqarfs")
    expect_version_line([SQARFS, "-V"], "sqarfs")


def test_help_mentions_version():
    out = run([SQAR, "--help"]).stdout
    if "--version" not in out or "-V" not in out:
        raise AssertionError(f"sqar --help does not mention --version / -V:\n{out}")


if __name__ == "__main__":
    main([test_sqar_version, test_sqar_short_version, test_sqarfs_version, test_help_mentions_version])
