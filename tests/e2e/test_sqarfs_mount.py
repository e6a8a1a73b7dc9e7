#!/usr/bin/env python3
"""sqarfs shows exactly the source tree: content, lstat fields, symlinks, devices, xattrs,
hard links; for mksquashfs images of several compressors and for `sqar create` images."""
import errno
import grp
import os
import pwd
import sys

from sqarfs_common import Mount, fuse_workspace, make_tree, sqar_create_works, sqarfs_binary, sqarfs_refused
from sqartest import AS_NOBODY, MKSQUASHFS_IGNORE, data_regions, mksquashfs, run, tree_differences


def mount_flags(mnt):
    """The options /proc/mounts shows for the mount at mnt."""
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1] == os.path.realpath(mnt):
                return fields[3].split(",")
    raise AssertionError(f"{mnt} is not mounted")


def check(img, src, mnt, label, ignore=(), holes=True):
    with Mount(img, mnt) as m:
        problems, seen = tree_differences(src, mnt, label, ignore=ignore, holes=holes)
        # Hard links share the inode number.
        a, b = os.lstat(f"{mnt}/small.txt"), os.lstat(f"{mnt}/sub/hardlink")
        if a.st_ino != b.st_ino:
            problems.append("hard links have different inode numbers")
        if os.path.exists(f"{mnt}/does-not-exist"):
            problems.append("a missing name exists")
        st = os.statvfs(mnt)
        if not st.f_flag & os.ST_RDONLY:
            problems.append("statfs does not say read-only")
        try:
            open(f"{mnt}/small.txt", "r+b")
            problems.append("opened a file for writing")
        except OSError:
            pass
        print(f"{label}: {seen} entries compared, mount took {m.mount_seconds * 1000:.1f} ms")
    if problems:
        print(f"FAIL {label}:\n  " + "\n  ".join(problems[:30]))
    return problems


def holes_match_the_kernel(tmp):
    """SEEK_DATA / SEEK_HOLE through sqarfs give the regions the kernel's squashfs gives for
    the same image (cp --sparse=auto and tar then skip the holes). Returns failures."""
    src, mnt, kmnt = f"{tmp}/holes-src", f"{tmp}/holes-mnt", f"{tmp}/holes-kernel"
    os.makedirs(src)
    layouts = {"islands": [(1 << 30, b"data"), (3 << 30, b"end")], "dense": [(0, os.urandom(300000))],
               "head-only": [(0, b"head")], "all-hole": [], "tail-data": [(5 << 20, b"tail")]}
    for name, writes in layouts.items():
        with open(f"{src}/{name}", "wb") as f:
            for off, data in writes:
                f.seek(off)
                f.write(data)
            f.truncate(max([off + len(d) for off, d in writes] + [4 << 30 if name == "islands" else 6 << 20]))
    img = f"{tmp}/holes.sqfs"
    sqar = sqar_create_works()
    if sqar:
        run([sqar, "create", "-q", src, img])
    else:
        mksquashfs(src, img)
    os.makedirs(kmnt, exist_ok=True)
    run(["mount", "-t", "squashfs", "-o", "loop,ro", img, kmnt])
    failures = []
    try:
        with Mount(img, mnt):
            for name in layouts:
                ours, kernel = data_regions(f"{mnt}/{name}"), data_regions(f"{kmnt}/{name}")
                if ours != kernel:
                    failures.append(f"holes of {name}: sqarfs {ours}, kernel {kernel}")
            if not data_regions(f"{mnt}/islands") or data_regions(f"{mnt}/islands")[0][0] == 0:
                failures.append("islands: no hole reported before the first island")
    finally:
        run(["umount", kmnt])
    print(f"SEEK_DATA/SEEK_HOLE: {'same as the kernel' if not failures else failures}")
    return failures


def blocks_match_the_kernel(tmp):
    """st_blocks through sqarfs is what the kernel's squashfs gives (du agrees): a file's
    stored bytes less its holes, plus the blocks of its xattr set, which sqarfs left out (a
    file with a 3000-byte xattr showed 1 block against the kernel's 7). Returns failures."""
    src, mnt, kmnt = f"{tmp}/blocks-src", f"{tmp}/blocks-mnt", f"{tmp}/blocks-kernel"
    os.makedirs(f"{src}/dir")
    with open(f"{src}/plain", "wb") as f:
        f.write(os.urandom(70000))
    with open(f"{src}/xattrs", "wb") as f:
        f.write(b"x")
    with open(f"{src}/sparse", "wb") as f:
        f.seek(1 << 20)
        f.write(b"end")
    os.setxattr(f"{src}/xattrs", "user.big", b"v" * 3000)
    os.setxattr(f"{src}/dir", "user.d", b"1")
    img = f"{tmp}/blocks.sqfs"
    mksquashfs(src, img, "-xattrs")
    os.makedirs(kmnt, exist_ok=True)
    run(["mount", "-t", "squashfs", "-o", "loop,ro", img, kmnt])
    failures = []
    try:
        with Mount(img, mnt):
            for name in ("plain", "xattrs", "sparse", "dir"):
                ours, kernel = os.lstat(f"{mnt}/{name}").st_blocks, os.lstat(f"{kmnt}/{name}").st_blocks
                if ours != kernel:
                    failures.append(f"st_blocks of {name}: sqarfs {ours}, kernel {kernel}")
    finally:
        run(["umount", kmnt])
    print(f"st_blocks: {'same as the kernel' if not failures else failures}")
    return failures


def xattrs_answer_as_the_kernel(tmp):
    """The kernel lists trusted.* names only to a caller with CAP_SYS_ADMIN; on an allow_other
    mount sqarfs listed them to every user. Names of namespaces SquashFS has no handler for
    (system.*, os2.*) are EOPNOTSUPP there, a bare prefix EINVAL. Returns failures."""
    src, mnt, kmnt = f"{tmp}/xattr-src", f"{tmp}/xattr-mnt", f"{tmp}/xattr-kernel"
    os.makedirs(src)
    os.chmod(tmp, 0o755)  # nobody must reach the mount points
    with open(f"{src}/f", "wb") as f:
        f.write(b"x")
    os.chmod(f"{src}/f", 0o644)
    os.setxattr(f"{src}/f", "trusted.secret-name", b"1")
    os.setxattr(f"{src}/f", "user.plain", b"2")
    img = f"{tmp}/xattr.sqfs"
    mksquashfs(src, img, "-xattrs")
    os.makedirs(kmnt, exist_ok=True)
    probe = ("import errno, os, sys\n"
             "path = sys.argv[1]\n"
             "out = [','.join(sorted(os.listxattr(path)))]\n"
             "for name in ('system.posix_acl_access', 'os2.x', 'user.', 'user.none'):\n"
             "    try:\n"
             "        os.getxattr(path, name); out.append(name + ':found')\n"
             "    except OSError as e:\n"
             "        out.append(name + ':' + errno.errorcode[e.errno])\n"
             "print(' '.join(out))\n")
    answers = {}
    run(["mount", "-t", "squashfs", "-o", "loop,ro", img, kmnt])
    try:
        with Mount(img, mnt, "allow_other"):
            for who, prefix in (("root", []), ("nobody", AS_NOBODY)):
                for reader, where in (("kernel", kmnt), ("sqarfs", mnt)):
                    answers[who, reader] = run([*prefix, sys.executable, "-c", probe, f"{where}/f"]).stdout.strip()
    finally:
        run(["umount", kmnt])
    failures = [f"xattrs as {who}: sqarfs {answers[who, 'sqarfs']!r}, kernel {answers[who, 'kernel']!r}"
                for who in ("root", "nobody") if answers[who, "sqarfs"] != answers[who, "kernel"]]
    if "trusted.secret-name" in answers["nobody", "kernel"] or "trusted" not in answers["root", "kernel"]:
        failures.append(f"the kernel's answers are not the ones this test expects: {answers}")
    print(f"xattrs: {'same as the kernel' if not failures else failures} ({answers['nobody', 'sqarfs']})")
    return failures


def main():
    failures = []
    with fuse_workspace() as (tmp, src, mnt):
        sqarfs = sqarfs_binary()
        make_tree(src)
        for comp in ("gzip", "zstd", "xz", "lz4", "lzo"):
            img = f"{tmp}/{comp}.sqfs"
            mksquashfs(src, img, "-comp", comp, "-xattrs")
            failures += check(img, src, mnt, f"mksquashfs -comp {comp}", MKSQUASHFS_IGNORE)
            os.unlink(img)
        img = f"{tmp}/nofrag.sqfs"
        mksquashfs(src, img, "-no-fragments", "-b", "4096", "-xattrs")
        failures += check(img, src, mnt, "mksquashfs -no-fragments -b 4096", MKSQUASHFS_IGNORE, holes=4096)

        # -o uid=/gid= present another owner; -o offset= finds an embedded image.
        with open(f"{tmp}/embedded.bin", "wb") as out:
            out.write(b"#!/bin/sh\nexit 0\n" + b"\0" * 4079)
            with open(img, "rb") as f:
                out.write(f.read())
        with Mount(f"{tmp}/embedded.bin", mnt, "offset=4K,uid=1000,gid=100,cache=1M,threads=4,noauto,nofail,_netdev"):
            problems, _ = tree_differences(src, mnt, "offset mount", ignore=MKSQUASHFS_IGNORE, holes=4096, uid=1000, gid=100)
            failures += [f"offset/uid/gid: {p}" for p in problems]
            # Run directly, the mount is nosuid,nodev (libfuse's default, documented).
            flags = mount_flags(mnt)
            if "nosuid" not in flags or "nodev" not in flags:
                failures.append(f"a direct mount has the flags {flags}, not nosuid,nodev")
        # -o max_read=N mounts (libfuse ended the session at FUSE_INIT: sqarfs exited 0 with
        # nothing mounted, and an fstab line with nofail failed silently).
        with Mount(img, mnt, "max_read=65536"):
            problems, _ = tree_differences(src, mnt, "max_read mount", ignore=MKSQUASHFS_IGNORE, holes=4096)
            failures += [f"max_read=65536: {p}" for p in problems]
            if "max_read=65536" not in mount_flags(mnt):
                failures.append(f"-o max_read=65536 gave the flags {mount_flags(mnt)}")
            # A name longer than any SquashFS name: ENAMETOOLONG, as the kernel's driver answers.
            try:
                os.stat(f"{mnt}/{'n' * 257}")
                failures.append("a 257-byte name was found")
            except OSError as e:
                if e.errno != errno.ENAMETOOLONG:
                    failures.append(f"a 257-byte name: {e}, not ENAMETOOLONG")
        # Owners by name, as fstab lines give them; dev,suid on request.
        nobody, nogroup = pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid
        with Mount(img, mnt, "uid=nobody,gid=nogroup,dev,suid"):
            problems, _ = tree_differences(src, mnt, "uid=nobody mount", ignore=MKSQUASHFS_IGNORE, holes=4096,
                                           uid=nobody, gid=nogroup)
            failures += [f"uid=nobody,gid=nogroup: {p}" for p in problems]
            flags = mount_flags(mnt)
            if "nosuid" in flags or "nodev" in flags:
                failures.append(f"-o dev,suid gave the flags {flags}")

        sqar = sqar_create_works()
        if sqar:
            img = f"{tmp}/sqar.sqfs"
            r = run([sqar, "create", src, img])
            failures += check(img, src, mnt, "sqar create")
        else:
            print("NOTE: `sqar create` is not available yet; sqar-built images not checked")

        # Errors are reported before daemonizing, with a non-zero exit.
        for args, why in (([f"{tmp}/missing.sqfs", mnt], "missing image"), ([src + "/text", mnt], "not an image"),
                          ([img, f"{tmp}/no-such-dir"], "missing mount point"), ([img, mnt, "-o", "bogus=1"], "unknown option"),
                          ([img, mnt, "-o", "uid=4294967296"], "uid past 32 bits (it wrapped to 0: root)"),
                          ([img, mnt, "-o", "gid=4294967295"], "gid -1"), ([img, mnt, "-o", "threads=0"], "threads=0"),
                          ([img, mnt, "-o", "uid=no-such-user-here"], "an unknown user name")):
            r = sqarfs_refused(args, mnt)
            if r.returncode == 0 or not r.stderr.strip():
                failures.append(f"{why}: exit {r.returncode}, stderr {r.stderr!r}")
        r = sqarfs_refused([img, mnt, "-o", "handoff=maybe"], mnt)
        if r.returncode == 0 or "handoff=maybe" not in r.stderr:
            failures.append(f"-o handoff=maybe: exit {r.returncode}, stderr {r.stderr!r}")
        failures += holes_match_the_kernel(tmp)
        failures += blocks_match_the_kernel(tmp)
        failures += xattrs_answer_as_the_kernel(tmp)
        help_text = run([sqarfs, "--help"]).stdout
        if "fuse.sqarfs" not in help_text or "cache=" not in help_text or "spin=" not in help_text:
            failures.append("--help lacks the fstab example or options")
    if failures:
        print(f"{len(failures)} problems")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
