"""Path patterns inside an image: extract, list, cat and create --exclude take the same globs
with the same rules, '**' spanning directories as in gitignore. The expected sets come from
Python's pathlib.glob (whose '**/' also matches zero or more directories) over the source tree."""
import os
import pathlib
import subprocess

from clitest import expect_fail, sqar
from sqartest import SQAR, main, run, tempdir, write

# (pattern, pathlib pattern giving the same matches)
PATTERNS = [("etc/**/*.conf", "etc/**/*.conf"), ("**/*.conf", "**/*.conf"), ("etc/*.conf", "etc/*.conf"),
            ("etc/a/**/x.conf", "etc/a/**/x.conf")]


def make_tree(root):
    """*.conf files at depths 1-5 under etc (and one outside), decoys that only a '*' crossing
    '/' or a '**' read as '*' would pick, and a directory named *.conf whose content comes along."""
    for rel in ["etc/x.conf", "etc/y.conf", "etc/a/x.conf", "etc/a/b/x.conf", "etc/a/b/c/z.conf",
                "etc/a/b/c/d/x.conf", "etc/q/x.conf", "etc/x.conf.bak", "etc/a/notes.txt",
                "etc/a/b/readme", "etc/dir.conf/inside.txt", "etc/dir.conf/sub/deep.txt", "top.conf",
                "usr/etc/x.conf", "usr/share/doc/x.txt"]:
        write(f"{root}/{rel}", f"content of {rel}\n".encode())
    return root


def reference(src, glob):
    """The entries PATTERN selects: what it matches and what lies below a matched directory."""
    base = pathlib.Path(src)
    out = set()
    for m in base.glob(glob):
        out.add(m.relative_to(base).as_posix())
        if m.is_dir():
            out.update(p.relative_to(base).as_posix() for p in m.rglob("*"))
    return out


def image_order(paths):
    """Depth-first, parents first, names in byte order: the order of a SquashFS directory walk."""
    return sorted(paths, key=lambda p: [c.encode() for c in p.split("/")])


def build(d):
    src = make_tree(f"{d}/src")
    img = f"{d}/img.sqfs"
    run([SQAR, "create", "-q", src, img])
    return src, img


def test_list():
    with tempdir() as d:
        src, img = build(d)
        for pattern, glob in PATTERNS:
            want = reference(src, glob)
            got = sqar("list", img, pattern).stdout.splitlines()
            assert set(got) == want, f"list {pattern}: got {sorted(got)}, want {sorted(want)}"
            assert got == image_order(got), f"list {pattern}: not in image order: {got}"
        assert len(reference(src, "etc/**/*.conf")) > len(reference(src, "etc/*/*.conf")) + 1
        expect_fail(["list", img, "etc/**/*.nope"], 1, img, "etc/**/*.nope: not found")


def test_extract():
    with tempdir() as d:
        src, img = build(d)
        for i, (pattern, glob) in enumerate(PATTERNS):
            out = f"{d}/out{i}"
            sqar("extract", "-q", "-C", out, img, pattern)
            files = {p.relative_to(out).as_posix() for p in pathlib.Path(out).rglob("*") if p.is_file()}
            want = {p for p in reference(src, glob) if os.path.isfile(f"{src}/{p}")}
            assert files == want, f"extract {pattern}: got {sorted(files)}, want {sorted(want)}"
            for p in files:
                assert pathlib.Path(f"{out}/{p}").read_bytes() == pathlib.Path(f"{src}/{p}").read_bytes(), p
        # As tar -x: a PATTERN that matches nothing is named (exit 1) and the others are still
        # extracted; when none matches, nothing is written.
        pattern, glob = PATTERNS[0]
        p = run([SQAR, "extract", "-q", "-C", f"{d}/some", img, pattern, "no/such/entry"], check=False)
        assert p.returncode == 1 and "no/such/entry: not found in the image" in p.stderr, p.stderr
        files = {q.relative_to(f"{d}/some").as_posix() for q in pathlib.Path(f"{d}/some").rglob("*") if q.is_file()}
        assert files == {q for q in reference(src, glob) if os.path.isfile(f"{src}/{q}")}, sorted(files)
        expect_fail(["extract", "-C", f"{d}/none", img, "no/such/entry"], 1, img, "no/such/entry: not found")
        assert not os.path.exists(f"{d}/none"), "extract of nothing made its directory"
        # A PATTERN below another one, or below an excluded directory, has found its entry:
        # no error, in a directory as in --tar.
        for args in (["etc/a", "etc/a/x.conf", "etc/a/**/x.conf"], ["--exclude", "etc/a", "etc/a/x.conf", "top.conf"]):
            p = run([SQAR, "extract", "-q", "-C", f"{d}/nested{len(args)}", img] + args, check=False)
            assert p.returncode == 0 and p.stderr == "", f"extract {args}: exit {p.returncode}, {p.stderr}"
            p = run([SQAR, "extract", "--tar", "-", img] + args, check=False, text=False)
            assert p.returncode == 0, f"extract --tar {args}: exit {p.returncode}, {p.stderr}"
        got = {q.relative_to(f"{d}/nested3").as_posix() for q in pathlib.Path(f"{d}/nested3").rglob("*") if q.is_file()}
        assert got == {q for q in reference(src, "etc/a") if os.path.isfile(f"{src}/{q}")}, sorted(got)
        assert os.listdir(f"{d}/nested4") == ["top.conf"], os.listdir(f"{d}/nested4")


def test_extract_exclude():
    """--exclude as tar -x takes it, matched as create's --exclude: a GLOB without '/' by name at
    any depth, one with '/' by path inside the image; an excluded directory takes all below it.
    The same entries are left out of --tar, and --exclude-from reads the GLOBs from a file."""
    with tempdir() as d:
        src, img = build(d)
        everything = {q.relative_to(src).as_posix() for q in pathlib.Path(src).rglob("*")}
        # Any component named *.conf (the directory etc/dir.conf takes its content along), and
        # the directory etc/a/b with all below it.
        want = {p for p in everything
                if not any(c.endswith(".conf") for c in p.split("/")) and not (p + "/").startswith("etc/a/b/")}
        assert "etc/dir.conf/inside.txt" in everything and "etc/a/b/readme" in everything and "etc/a/notes.txt" in want
        sqar("extract", "-q", "-C", f"{d}/out", "--exclude", "*.conf", "--exclude", "/etc/a/b", img)
        got = {q.relative_to(f"{d}/out").as_posix() for q in pathlib.Path(f"{d}/out").rglob("*")}
        assert got == want, f"extract --exclude: extra {sorted(got - want)}, missing {sorted(want - got)}"
        write(f"{d}/patterns", b"# as create reads them\n*.conf\n/etc/a/b\n")
        tar = subprocess.run([SQAR, "extract", "--tar", "-", "--exclude-from", f"{d}/patterns", img],
                             stdout=subprocess.PIPE, check=True).stdout
        listed = subprocess.run(["tar", "-t"], input=tar, stdout=subprocess.PIPE, check=True).stdout.decode()
        got = {line.rstrip("/") for line in listed.splitlines()}
        assert got == want, f"extract --tar --exclude-from: extra {sorted(got - want)}, missing {sorted(want - got)}"


def test_cat():
    with tempdir() as d:
        src, img = build(d)
        for pattern, glob in PATTERNS:
            files = image_order(p for p in reference(src, glob) if os.path.isfile(f"{src}/{p}"))
            want = b"".join(pathlib.Path(f"{src}/{p}").read_bytes() for p in files)
            p = subprocess.run([SQAR, "cat", img, pattern], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert p.returncode == 0, f"cat {pattern}: exit {p.returncode}: {p.stderr}"
            got = p.stdout
            assert got == want, f"cat {pattern}: got {got!r}, want {want!r}"
        # A pattern that matches nothing is an error naming it; the other PATTERNs still print.
        p = expect_fail(["cat", img, "etc/**/*.nope", "top.conf"], 1, "etc/**/*.nope")
        assert p.stdout == "content of top.conf\n", p.stdout


def test_create_exclude():
    with tempdir() as d:
        src = make_tree(f"{d}/src")
        everything = {p.relative_to(src).as_posix() for p in pathlib.Path(src).rglob("*")}
        for i, (pattern, glob) in enumerate(PATTERNS):
            img = f"{d}/ex{i}.sqfs"
            run([SQAR, "create", "-q", "--exclude", pattern, src, img])
            got = set(sqar("list", img).stdout.splitlines())
            want = everything - reference(src, glob)
            assert got == want, f"--exclude {pattern}: extra {sorted(got - want)}, missing {sorted(want - got)}"


main([test_list, test_extract, test_extract_exclude, test_cat, test_create_exclude])
