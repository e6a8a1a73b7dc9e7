#!/usr/bin/env python3
"""fstab mounts: `fuse.sqarfs` through mount(8) -> mount.fuse3 -> sqarfs, and the same
image through the kernel's squashfs driver; both must show the source tree. Every option
form a user writes in fstab mounts read-only (mount(8) passes rw unless told ro); a
misspelled option mounts nothing."""
import os
import shutil
import subprocess
import sys

from sqarfs_common import make_tree, require_fuse, sqar_create_works, sqarfs_binary
from sqartest import (MKSQUASHFS_IGNORE, exit_status, is_mounted, kernel_reports_holes, mksquashfs, run, skip, tempdir,
                      tree_differences, unmount_fuse)


READ_ONLY_NOTE = "mounted read-only"


def mount_cmd(args, env):
    r = subprocess.run(["mount", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    return r.returncode, r.stderr.strip()


UNAVAILABLE = []  # the kernel mounts this machine cannot make: a reported skip once all else passed


def mount_options(mnt):
    """The per-mount options of mnt in /proc/self/mountinfo (field 6), or None."""
    real = os.path.realpath(mnt)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == real:
                return fields[5].split(",")
    return None


def check_mount(label, args, src, mnt, env, problems, may_skip=False, rw_note=False):
    """Mounts with `mount ARGS`, compares the tree, checks the mount is read-only and that the
    read-only note was logged exactly when asked for (rw_note), then unmounts."""
    rc, err = mount_cmd(args, env)
    if rc != 0:
        if may_skip:
            print(f"NOTE: {label}: kernel mount unavailable here ({err})")
            UNAVAILABLE.append(f"{label}: {err}")
            return
        problems.append(f"{label}: mount {' '.join(args)} failed ({rc}): {err}")
        return
    try:
        ignore = MKSQUASHFS_IGNORE if label.startswith("mksquashfs") else ()
        holes = kernel_reports_holes() if "kernel" in label else True
        diffs, seen = tree_differences(src, mnt, label, ignore=ignore, holes=holes)
        problems += [f"{label}: {d}" for d in diffs]
        if not os.statvfs(mnt).f_flag & os.ST_RDONLY or "ro" not in (mount_options(mnt) or []):
            problems.append(f"{label}: not mounted read-only: {mount_options(mnt)}")
        if not may_skip and err.count(READ_ONLY_NOTE) != (1 if rw_note else 0):
            problems.append(f"{label}: expected the read-only note {'once' if rw_note else 'never'}, got: {err!r}")
        print(f"{label}: {seen} entries compared, read-only" + (f"; said: {err}" if err else ""))
    finally:
        if not unmount_fuse(mnt):
            problems.append(f"{label}: unmount failed")


def check_fstab(label, line, src, mnt, tmp, env, problems, may_skip=False, rw_note=False):
    fstab = f"{tmp}/fstab"
    with open(fstab, "w") as f:
        f.write(line + "\n")
    check_mount(label, ["-T", fstab, mnt], src, mnt, env, problems, may_skip, rw_note)


def check_refused(label, args, mnt, env, problems):
    """`mount ARGS` with a misspelled option: fails, names the option, mounts nothing."""
    rc, err = mount_cmd(args, env)
    if rc == 0 or "bogus=1" not in err or "unknown mount option" not in err:
        problems.append(f"{label}: expected a failure naming the unknown option, got exit {rc}: {err!r}")
    if is_mounted(mnt):
        problems.append(f"{label}: something was mounted")
        unmount_fuse(mnt)
    print(f"{label}: exit {rc}: {err.splitlines()[0] if err else ''}")


def main():
    require_fuse()
    sqarfs = sqarfs_binary()
    if not shutil.which("mount.fuse3"):
        skip("mount.fuse3 is not installed")
    problems = []
    with tempdir() as tmp:
        src, mnt = f"{tmp}/src", f"{tmp}/mnt"
        make_tree(src)
        os.makedirs(mnt)
        # mount.fuse3 runs `sqarfs` through /bin/sh. util-linux mount(8) drops PATH from the
        # helper's environment, so the shell searches only its default path
        # (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin) -- which is why
        # `cmake --install` to /usr/local/bin is what makes fstab work. Put our binary
        # on PATH for mount implementations that keep it, and, when no sqarfs is installed,
        # link it into /usr/local/bin for the duration of the test.
        bindir = f"{tmp}/bin"
        os.makedirs(bindir)
        os.symlink(os.path.abspath(sqarfs), f"{bindir}/sqarfs")
        env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}")
        images = []
        img = f"{tmp}/mk.sqfs"
        mksquashfs(src, img, "-comp", "zstd", "-xattrs")
        images.append(("mksquashfs", img))
        sqar = sqar_create_works()
        if not sqar:
            raise AssertionError(f"`sqar create` does not run (SQAR={os.environ.get('SQAR', '')!r})")
        run([sqar, "create", src, f"{tmp}/sqar.sqfs"])
        images.append(("sqar create", f"{tmp}/sqar.sqfs"))
        system_link = "/usr/local/bin/sqarfs"
        made_link = False
        if not os.path.lexists(system_link) and os.path.isdir("/usr/local/bin"):
            os.symlink(os.path.abspath(sqarfs), system_link)
            made_link = True
        elif not os.path.exists(system_link) or not os.path.samefile(system_link, sqarfs):
            print(f"NOTE: {system_link} is another sqarfs; the fuse.sqarfs lines test that one")
        try:
            for label, image in images:
                # The old "fuse" type with PROGRAM#SOURCE takes an absolute path: always ours.
                check_fstab(f"{label} via fuse + program#source", f"{sqarfs}#{image} {mnt} fuse ro,allow_other,noauto 0 0",
                            src, mnt, tmp, env, problems)
                check_fstab(f"{label} via fuse.sqarfs", f"{image} {mnt} fuse.sqarfs ro,allow_other,noauto 0 0", src, mnt, tmp,
                            env, problems)
                check_fstab(f"{label} via fuse.sqarfs (more options)",
                            f"{image} {mnt} fuse.sqarfs ro,allow_other,noauto,nofail,_netdev,nodev,cache=8M,threads=4 0 0", src,
                            mnt, tmp, env, problems)
                check_fstab(f"{label} via kernel squashfs", f"{image} {mnt} squashfs ro,loop 0 0", src, mnt, tmp, env, problems,
                            may_skip=True)
            # The forms users write. mount(8) passes rw unless the line says ro; sqarfs mounts
            # read-only all the same and says so once, as the kernel's drivers do.
            image = images[-1][1]
            for opts, rw_note in (("defaults", True), ("ro", False), ("rw", True), ("noauto,user", True),
                                  ("nofail", True), ("relatime,x-systemd.automount,comment=x", True)):
                check_fstab(f"fstab {opts}", f"{image} {mnt} fuse.sqarfs {opts} 0 0", src, mnt, tmp, env, problems,
                            rw_note=rw_note)
            check_mount("mount -t fuse.sqarfs without -o", ["-t", "fuse.sqarfs", image, mnt], src, mnt, env, problems,
                        rw_note=True)
            with open(f"{tmp}/fstab", "w") as f:
                f.write(f"{image} {mnt} fuse.sqarfs ro,bogus=1 0 0\n")
            check_refused("fstab ro,bogus=1", ["-T", f"{tmp}/fstab", mnt], mnt, env, problems)
            check_refused("mount -t fuse.sqarfs -o bogus=1", ["-t", "fuse.sqarfs", "-o", "bogus=1", image, mnt], mnt, env,
                          problems)
        finally:
            if made_link:
                os.unlink(system_link)
        if is_mounted(mnt):
            problems.append("left mounted")
            unmount_fuse(mnt)
    if not problems and UNAVAILABLE:
        skip("the kernel's squashfs cannot mount here: " + "; ".join(UNAVAILABLE))
    return exit_status(problems)


if __name__ == "__main__":
    sys.exit(main())
