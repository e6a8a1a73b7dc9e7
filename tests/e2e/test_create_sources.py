#!/usr/bin/env python3
"""How `sqar create` reads its SOURCE arguments, as users write them: an unreadable directory
met by a non-root user stops the build with an error that names it and suggests
--skip-unreadable; a SOURCE that is a symlink to a directory is stored as the symlink with a
warning, and `SRC/` packs the directory it points to (as rsync reads it; beside other SOURCEs
under its own name); --keep-as-directory
stores a single SOURCE directory under its own name (compared with mksquashfs
-keep-as-directory); an --exclude written as a source path ('/var/log/journal' for SOURCE
/var/log) leaves out that path. Images are read back with unsquashfs."""
import os
import subprocess

from sqartest import AS_NOBODY, SQAR, log, main, mksquashfs, need_tool, run, tempdir, unsquashfs_extract, write

def log_tree(root):
    write(f"{root}/journal/system.journal", b"journal\n" * 100)
    write(f"{root}/apt/history.log", b"apt\n" * 50)
    write(f"{root}/syslog", b"syslog\n" * 70)
    return root


def listing(out):
    """Every path below out, relative, sorted (directories with a trailing '/')."""
    paths = []
    for d, dirs, files in os.walk(out):
        rel = os.path.relpath(d, out)
        for n in dirs:
            paths.append(os.path.normpath(os.path.join(rel, n)) + "/")
        for n in files:
            paths.append(os.path.normpath(os.path.join(rel, n)))
    return sorted(paths)


def test_unreadable_directory_suggests_skip_unreadable():
    with tempdir() as d:
        os.chmod(d, 0o777)  # reachable and writable by the unprivileged user
        src = log_tree(f"{d}/src")
        os.chmod(f"{src}/journal", 0o000)
        for dirpath, dirs, files in os.walk(src):
            for n in dirs + files:
                if n != "journal":
                    os.chmod(os.path.join(dirpath, n), 0o755)
        os.chmod(src, 0o755)
        nobody = AS_NOBODY if os.geteuid() == 0 else []
        p = run([*nobody, SQAR, "create", "-q", src, f"{d}/img"], check=False)
        assert p.returncode == 1, f"exit {p.returncode}: {p.stderr}"
        assert f"{src}/journal: Permission denied" in p.stderr and "--skip-unreadable" in p.stderr, p.stderr
        assert not os.path.exists(f"{d}/img"), "a failed build left an image"
        log(f"ok: {p.stderr.strip()}")
        p = run([*nobody, SQAR, "create", "-q", "--skip-unreadable", src, f"{d}/img"], check=False)
        assert p.returncode == 0, f"--skip-unreadable: exit {p.returncode}: {p.stderr}"
        os.chmod(f"{src}/journal", 0o755)
        unsquashfs_extract(f"{d}/img", f"{d}/out")
        assert listing(f"{d}/out") == ["apt/", "apt/history.log", "journal/", "syslog"], listing(f"{d}/out")
        log("ok: with --skip-unreadable the directory is stored empty")


def test_symlink_to_a_directory_as_source():
    with tempdir() as d:
        log_tree(f"{d}/real")
        os.symlink("real", f"{d}/link")
        p = run([SQAR, "create", "-q", f"{d}/link", f"{d}/plain.sqfs"])
        assert f"warning: {d}/link: a symlink to a directory" in p.stderr and f"'{d}/link/'" in p.stderr, p.stderr
        unsquashfs_extract(f"{d}/plain.sqfs", f"{d}/out1")
        assert listing(f"{d}/out1") == ["link"] and os.readlink(f"{d}/out1/link") == "real", listing(f"{d}/out1")
        log(f"ok: {p.stderr.strip()}")
        p = run([SQAR, "create", "-q", f"{d}/link/", f"{d}/followed.sqfs"])
        assert "warning" not in p.stderr, p.stderr
        unsquashfs_extract(f"{d}/followed.sqfs", f"{d}/out2")
        assert listing(f"{d}/out2") == listing(f"{d}/real"), listing(f"{d}/out2")
        log("ok: SRC/ packs the directory the symlink points to, without a warning")
        # Beside another SOURCE (or with --keep-as-directory) too: it was stored as the symlink
        # then, without a word. The directory keeps its own name.
        os.makedirs(f"{d}/other")
        write(f"{d}/other/g", b"g\n")
        for args, name in (([f"{d}/link/", f"{d}/other"], "several"), (["--keep-as-directory", f"{d}/link/"], "kept")):
            p = run([SQAR, "create", "-q", *args, f"{d}/{name}.sqfs"])
            assert "warning" not in p.stderr, p.stderr
            unsquashfs_extract(f"{d}/{name}.sqfs", f"{d}/out-{name}")
            assert os.path.isdir(f"{d}/out-{name}/real") and not os.path.islink(f"{d}/out-{name}/real")
            assert listing(f"{d}/out-{name}/real") == listing(f"{d}/real"), listing(f"{d}/out-{name}")


def test_keep_as_directory():
    with tempdir() as d:
        src = log_tree(f"{d}/log")
        run([SQAR, "create", "-q", "--keep-as-directory", src, f"{d}/kept.sqfs"])
        unsquashfs_extract(f"{d}/kept.sqfs", f"{d}/out")
        expected = ["log/"] + [f"log/{p}" for p in listing(src)]
        assert listing(f"{d}/out") == expected, listing(f"{d}/out")
        for p in listing(src):
            if not p.endswith("/"):
                assert open(f"{d}/out/log/{p}", "rb").read() == open(f"{src}/{p}", "rb").read(), p
        need_tool("mksquashfs")
        mksquashfs(src, f"{d}/mk.sqfs", "-keep-as-directory")
        unsquashfs_extract(f"{d}/mk.sqfs", f"{d}/mk")
        assert listing(f"{d}/mk") == expected, f"mksquashfs -keep-as-directory gives {listing(f'{d}/mk')}"
        log("ok: --keep-as-directory stores the SOURCE under its name, as mksquashfs -keep-as-directory does")


def test_exclude_written_as_a_source_path():
    with tempdir() as d:
        src = log_tree(f"{d}/var/log")
        for extra, top in (([], ""), (["--keep-as-directory"], "log/")):
            img = f"{d}/img{len(extra)}.sqfs"
            p = run([SQAR, "create", "-q", *extra, "--exclude", f"{src}/journal", src, img])
            assert f"--exclude '{src}/journal' names a path below SOURCE {src}: taken as '/{top}journal'" in p.stderr, \
                p.stderr
            out = f"{d}/out{len(extra)}"
            unsquashfs_extract(img, out)
            want = [f"{top}{x}" for x in ("apt/", "apt/history.log", "syslog")]
            assert listing(out) == ([top] if top else []) + want, listing(out)
            log(f"ok: {p.stderr.strip()}")
        # The image-relative form still works, and a pattern naming no SOURCE is left alone.
        run([SQAR, "create", "-q", "--exclude", "/journal", "--exclude", "/elsewhere/x", src, f"{d}/rel.sqfs"])
        unsquashfs_extract(f"{d}/rel.sqfs", f"{d}/rel")
        assert listing(f"{d}/rel") == ["apt/", "apt/history.log", "syslog"], listing(f"{d}/rel")
        log("ok: the image-relative form still excludes")


def test_anchored_exclude_that_matches_nothing_warns():
    with tempdir() as d:
        src = log_tree(f"{d}/var/log")
        cases = (  # extra options, pattern, the warning's suggestion (None: no warning)
            ([], "log/journal", "did you mean '/journal'?"),
            ([], "/log/journal/", "did you mean '/journal/'?"),
            ([], "var/log/jour*", "did you mean '/jour*'?"),
            (["--keep-as-directory"], "var/log/journal", "did you mean '/log/journal'?"),
            ([], "/elsewhere/x", ""),
            ([], "/journal", None),
            ([], "*.nope", None),
        )
        for i, (extra, pattern, meant) in enumerate(cases):
            img = f"{d}/w{i}.sqfs"
            p = run([SQAR, "create", "-q", *extra, "--exclude", pattern, src, img])
            warned = [line for line in p.stderr.splitlines() if "matched nothing" in line]
            if meant is None:
                assert not warned, f"--exclude {pattern}: {p.stderr}"
                continue
            assert len(warned) == 1 and f"--exclude '{pattern}' matched nothing" in warned[0], p.stderr
            assert "path in the image" in warned[0] and meant in warned[0], warned
            if not meant:
                assert "did you mean" not in warned[0], warned
            # A warning only: the image is built, with nothing left out.
            paths = run([SQAR, "list", img]).stdout.splitlines()
            assert any(x.endswith("journal/system.journal") for x in paths), paths
            log(f"ok: {warned[0]}")
        # A pattern that names the root excludes nothing, and says so.
        for pattern in ("/", "", "./"):
            p = run([SQAR, "create", "-q", "-f", "--exclude", pattern, src, f"{d}/root.sqfs"])
            assert f"--exclude '{pattern}' names the root, which is never excluded" in p.stderr, p.stderr
        log("ok: --exclude of the root warns that it excludes nothing")


if __name__ == "__main__":
    main([test_unreadable_directory_suggests_skip_unreadable, test_symlink_to_a_directory_as_source,
          test_keep_as_directory, test_exclude_written_as_a_source_path,
          test_anchored_exclude_that_matches_nothing_warns])
