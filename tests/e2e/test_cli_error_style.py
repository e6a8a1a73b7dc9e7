"""Every sqar command reports errors the same way: a bad command line prints "sqar CMD: message"
and "Try 'sqar CMD --help' for examples." and exits 2; a failure prints "sqar CMD: FILE: cause"
on one line and exits 1 (diff: 2, as 1 means "the trees differ")."""
import os
import re
import subprocess

from sqartest import SQAR, main, run, tempdir


def listed_commands():
    return re.findall(r"^  ([a-z]+) ", run([SQAR, "--help"]).stdout, re.M)


def test_bad_option_is_a_usage_error_in_every_command():
    commands = listed_commands()
    assert "create" in commands and "list" in commands, commands
    for cmd in commands:
        p = run([SQAR, cmd, "--bogus-option", "x", "y"], check=False)
        want = f"sqar {cmd}: unknown option '--bogus-option'\nTry 'sqar {cmd} --help' for examples.\n"
        assert p.returncode == 2 and p.stderr == want and p.stdout == "", (cmd, p.returncode, p.stderr)
        # An unknown letter inside a cluster is named itself, not the argument before it.
        p = run([SQAR, cmd, "x", "-%y"], check=False)
        assert p.returncode == 2 and p.stderr.startswith(f"sqar {cmd}: unknown option '-%'\n"), (cmd, p.stderr)
        p = run([SQAR, cmd], check=False)
        assert p.returncode == 2 and p.stderr.startswith(f"sqar {cmd}: ") and \
            p.stderr.endswith(f"Try 'sqar {cmd} --help' for examples.\n"), (cmd, p.returncode, p.stderr)


def test_long_option_errors_name_the_option_as_typed():
    """getopt reports '--force=yes' by the option's short letter and an ambiguous prefix as
    unknown; both are named as typed, with the cause. An option before any command is one line,
    not the whole usage."""
    cases = [(["list", "--long=foo", "x"], "option '--long' takes no value"),
             (["create", "--force=yes", "a", "b"], "option '--force' takes no value"),
             (["extract", "--overwrite=yes", "x"], "option '--overwrite' takes no value"),
             (["create", "--no", "a", "b"],
              "option '--no' is ambiguous: it could be --no-xattrs, --no-dedup, --no-manifest, --no-export"),
             (["list", "-lls", "x"], "'-lls' is unsquashfs's option; sqar's: -l/--long")]
    for args, message in cases:
        p = run([SQAR, *args], check=False)
        want = f"sqar {args[0]}: {message}\nTry 'sqar {args[0]} --help' for examples.\n"
        assert p.returncode == 2 and p.stderr == want, (args, p.returncode, p.stderr)
    p = run([SQAR, "--bogus"], check=False)
    assert p.returncode == 2 and p.stderr.splitlines() == [
        "sqar: unknown option '--bogus' (options follow a command: sqar COMMAND [OPTIONS])",
        "Try 'sqar --help' for the commands."], p.stderr


def test_settings_the_inputs_refuse_are_usage_errors():
    """A level out of the range of the compressor an input image brings, or a compressor
    append cannot write into IMAGE, is a bad command line (exit 2) in append and merge as in
    create; directory-only options with extract --tar are refused, not silently ignored."""
    with tempdir() as d:
        for name in ("a", "b"):
            os.makedirs(f"{d}/{name}")
            with open(f"{d}/{name}/{name}", "w") as f:
                f.write(name)
            run([SQAR, "create", "-q", f"{d}/{name}", f"{d}/{name}.sqfs"])
        before = open(f"{d}/a.sqfs", "rb").read()
        for args, message in ((["create", "-l", "99", f"{d}/a", f"{d}/c.sqfs"], "level 99 is out of range for zstd"),
                              (["merge", "-l", "99", f"{d}/a.sqfs", f"{d}/b.sqfs", f"{d}/m.sqfs"],
                               "level 99 is out of range for zstd (1-22)"),
                              (["append", "-l", "99", f"{d}/a.sqfs", f"{d}/b"], "level 99 is out of range for zstd"),
                              (["append", "-c", "gzip", f"{d}/a.sqfs", f"{d}/b"], "new data is stored the same way"),
                              (["extract", "--tar", f"{d}/o.tar", "--overwrite", f"{d}/a.sqfs"],
                               "--overwrite is for files in a directory"),
                              (["extract", "--tar", f"{d}/o.tar", "--no-same-owner", f"{d}/a.sqfs"],
                               "--no-same-owner is for files in a directory")):
            p = run([SQAR, *args], check=False)
            assert p.returncode == 2 and message in p.stderr and \
                p.stderr.endswith(f"Try 'sqar {args[0]} --help' for examples.\n"), (args, p.returncode, p.stderr)
        assert sorted(os.listdir(d)) == ["a", "a.sqfs", "b", "b.sqfs"], os.listdir(d)
        assert open(f"{d}/a.sqfs", "rb").read() == before


def test_a_missing_file_is_named_with_its_cause():
    with tempdir() as d:
        missing = f"{d}/missing"
        for args, code in ((["create", missing, f"{d}/img.sqfs"], 1), (["list", missing], 1),
                           (["info", missing], 1), (["cat", missing, "a"], 1), (["extract", missing, "-C", d], 1),
                           (["verify", missing], 1), (["diff", missing, d], 2)):
            p = run([SQAR, *args], check=False)
            want = f"sqar {args[0]}: {missing}: No such file or directory\n"
            assert p.returncode == code and p.stderr == want, (args, p.returncode, p.stderr)


def test_an_empty_pattern_is_a_usage_error():
    """`sqar extract img "$DIR"` with DIR unset must not extract the whole image: an empty
    PATTERN is a usage error before anything is done, as GNU tar reports it not found."""
    with tempdir() as d:
        os.makedirs(f"{d}/src")
        open(f"{d}/src/f", "w").close()
        img = f"{d}/img.sqfs"
        run([SQAR, "create", "-q", f"{d}/src", img])
        for args in (["list", img, ""], ["extract", "-C", f"{d}/out", img, ""], ["cat", img, "f", ""],
                     ["extract", "--tar", f"{d}/out.tar", img, "f", ""]):
            p = run([SQAR, *args], check=False)
            assert p.returncode == 2 and "empty PATTERN" in p.stderr and p.stdout == "", (args, p.returncode, p.stderr)
        assert not os.path.exists(f"{d}/out") and not os.path.exists(f"{d}/out.tar")


def test_output_lost_on_standard_output_is_a_failure():
    """What a command prints is its answer: standard output full (/dev/full) or closed is a
    failure naming standard output and the cause (diff: 2), as coreutils and tar report it."""
    with tempdir() as d:
        os.makedirs(f"{d}/src")
        with open(f"{d}/src/f", "w") as f:
            f.write("x")
        img = f"{d}/img.sqfs"
        run([SQAR, "create", "-q", f"{d}/src", img])
        with open(f"{d}/src/f", "w") as f:
            f.write("changed")
        commands = ((["info", img], 1), (["info", "--json", img], 1), (["list", "-l", img], 1),
                    (["verify", "--json", img], 1), (["diff", img, f"{d}/src"], 2),
                    (["create", "--json", "-f", f"{d}/src", f"{d}/other.sqfs"], 1),
                    (["merge", "--json", "-f", img, f"{d}/merged.sqfs"], 1))
        for args, code in commands:
            if os.path.exists("/dev/full"):
                with open("/dev/full", "w") as full:
                    p = run([SQAR, *args], check=False, stdout=full)
                want = f"sqar {args[0]}: standard output: No space left on device\n"
                assert p.returncode == code and p.stderr.endswith(want), (args, "/dev/full", p.returncode, p.stderr)
            p = run([SQAR, *args], check=False, stdout=subprocess.DEVNULL, pass_fds=(), preexec_fn=lambda: os.close(1))
            assert p.returncode == code and "standard output: Bad file descriptor" in p.stderr, \
                (args, "closed", p.returncode, p.stderr)


if __name__ == "__main__":
    main([test_bad_option_is_a_usage_error_in_every_command, test_long_option_errors_name_the_option_as_typed,
          test_settings_the_inputs_refuse_are_usage_errors, test_a_missing_file_is_named_with_its_cause,
          test_an_empty_pattern_is_a_usage_error, test_output_lost_on_standard_output_is_a_failure])
