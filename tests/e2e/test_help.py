"""`sqar help COMMAND` prints that command's help, as `sqar COMMAND --help` does; `sqar help`
and `sqar --help` list the commands and document the exit codes; an unknown command is a
usage error (exit 2)."""
import re

from sqartest import SQAR, main, run

def listed_commands():
    out = run([SQAR, "--help"]).stdout
    return re.findall(r"^  ([a-z]+) ", out, re.M)


def test_help_command_prints_the_commands_help():
    commands = listed_commands()
    if "create" not in commands or "extract" not in commands:
        raise AssertionError(f"sqar --help lists {commands}")
    for cmd in commands:
        direct = run([SQAR, cmd, "--help"])
        via_help = run([SQAR, "help", cmd])
        if via_help.returncode != 0 or via_help.stdout != direct.stdout:
            raise AssertionError(f"`sqar help {cmd}` (exit {via_help.returncode}) differs from `sqar {cmd} --help`:\n"
                                 f"{via_help.stdout[:300]}")
        if f"sqar {cmd}" not in via_help.stdout:
            raise AssertionError(f"`sqar help {cmd}` does not show {cmd}'s usage:\n{via_help.stdout[:300]}")


def test_general_help_documents_exit_codes():
    for args in (["--help"], ["help"], ["-h"]):
        out = run([SQAR, *args]).stdout
        if "Exit status" not in out or "0 on success" not in out or "2 on bad" not in out:
            raise AssertionError(f"sqar {' '.join(args)} does not document the exit codes:\n{out}")
        if "sqar help COMMAND" not in out:
            raise AssertionError(f"sqar {' '.join(args)} does not mention `sqar help COMMAND`:\n{out}")


def test_every_commands_help_documents_exit_codes():
    for cmd in listed_commands():
        out = run([SQAR, cmd, "--help"]).stdout
        status = out[out.find("Exit status:"):]
        codes = [c for c in ("0", "1", "2") if not re.search(rf"\b{c} (on|when)\b", status)]
        if not status or codes or "usage" not in status:
            raise AssertionError(f"sqar {cmd} --help does not give exit codes {codes} and bad usage:\n{out}")


def test_help_of_an_unknown_command_is_a_usage_error():
    p = run([SQAR, "help", "crate"], check=False)
    if p.returncode != 2 or "unknown command 'crate'" not in p.stderr:
        raise AssertionError(f"sqar help crate: exit {p.returncode}, stderr {p.stderr!r}")


if __name__ == "__main__":
    main([test_help_command_prints_the_commands_help,
          test_general_help_documents_exit_codes, test_every_commands_help_documents_exit_codes,
          test_help_of_an_unknown_command_is_a_usage_error])
