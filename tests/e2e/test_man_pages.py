"""The man pages render without warnings, document every option that --help prints, and are
installed by `cmake --install`.

sqar(1) has one subsection per command ("sqar create [OPTIONS] ..."); each command's options
must appear in its own subsection, so an option documented under the wrong command fails.
sqarfs(8)'s OPTIONS section must name every option and every -o key of `sqarfs --help`.
"""
import os
import re
import shutil
import subprocess

from sqartest import SQAR, SQARFS, log, main, need_tool, run, skip, tempdir

SOURCE_DIR = os.environ.get("SQAR_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MAN_DIR = os.path.join(SOURCE_DIR, "man")
SQAR_PAGE = os.path.join(MAN_DIR, "sqar.1")
SQARFS_PAGE = os.path.join(MAN_DIR, "sqarfs.8")

# An option token: -x or --long-name, not part of a longer word (e.g. not the "-o" in "x-o").
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)")


def render(page):
    """The page as plain ASCII text (no bold/underline sequences, no hyphenation)."""
    return run(["groff", "-man", "-Tascii", "-P-cbou", page]).stdout


def option_lines(help_text):
    """Lines of a --help text that define options: they start (after indentation) with '-'."""
    return [line for line in help_text.splitlines() if re.match(r"^\s+-[A-Za-z-]", line)]


def options_in(help_text):
    return sorted({m for line in option_lines(help_text) for m in OPTION.findall(line)})


def sqarfs_o_keys(help_text):
    """The keys of `-o KEY=VALUE` / `-o KEY, KEY` lines (the text before the description)."""
    keys = set()
    for line in option_lines(help_text):
        m = re.match(r"^\s+-o\s+(.*?)(?:\s{2,}|$)", line)
        if not m:
            continue
        for word in re.split(r"[,\s]+", m.group(1)):
            key = word.split("=", 1)[0]
            if key and "..." not in key:
                keys.add(key)
    return sorted(keys)


def appears(word, text):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


def section(text, title):
    """The body of a top-level section (.SH TITLE): up to the next unindented line."""
    m = re.search(r"^" + re.escape(title) + r"\n(.*?)(?=^\S)", text, re.S | re.M)
    if not m:
        raise AssertionError(f"no section {title!r} in the rendered page")
    return m.group(1)


def command_subsections(text):
    """{command: body} for the '   sqar COMMAND ...' subsections of sqar(1)'s COMMANDS section."""
    body = section(text, "COMMANDS")
    parts = re.split(r"^   sqar (\w+) .*\n", body, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def sqar_commands():
    """The command names `sqar --help` lists."""
    out = run([SQAR, "--help"]).stdout
    block = out.split("Commands:", 1)[1].split("\n\n", 1)[0]
    names = [line.split()[0] for line in block.splitlines() if line.strip()]
    if len(names) < 7:
        raise AssertionError(f"sqar --help lists only {names}")
    return names


def missing(words, text):
    return [w for w in words if not appears(w, text)]


def test_pages_render_without_warnings():
    for page in (SQAR_PAGE, SQARFS_PAGE):
        p = run(["groff", "-man", "-Tutf8", "-ww", "-z", page], check=False)
        if p.returncode != 0 or p.stderr.strip():
            raise AssertionError(f"groff warns about {page} (exit {p.returncode}):\n{p.stderr}")
        if shutil.which("man"):
            env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
            p = run(["man", "--warnings", "-l", page], check=False, env=env)
            if p.returncode != 0 or p.stderr.strip() or "NAME" not in p.stdout:
                raise AssertionError(f"man -l {page} exited {p.returncode}:\n{p.stderr}")
        else:
            log("note: man is not installed; checked with groff only")
        text = render(page)
        for title in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "SEE ALSO"):
            section(text, title)


def test_sqar_page_has_every_command_and_option():
    text = render(SQAR_PAGE)
    top_level = options_in(run([SQAR, "--help"]).stdout) + ["-V", "--version"]
    gone = missing(top_level, section(text, "GLOBAL OPTIONS"))
    if gone:
        raise AssertionError(f"sqar(1) GLOBAL OPTIONS lacks {gone}")
    subsections = command_subsections(text)
    problems = []
    for cmd in sqar_commands():
        if cmd not in subsections:
            problems.append(f"no subsection for 'sqar {cmd}'")
            continue
        opts = options_in(run([SQAR, cmd, "--help"]).stdout)
        if not opts:
            problems.append(f"sqar {cmd} --help lists no options (parse error in this test?)")
        gone = missing(opts, subsections[cmd])
        if gone:
            problems.append(f"sqar {cmd}: {gone}")
        log(f"sqar {cmd}: {len(opts)} options checked")
    if problems:
        raise AssertionError("sqar(1) lacks: " + "; ".join(problems))


def test_sqarfs_page_has_every_option():
    help_text = run([SQARFS, "--help"]).stdout
    opts = options_in(help_text)
    keys = sqarfs_o_keys(help_text)
    if "-o" not in opts or "cache" not in keys:
        raise AssertionError(f"could not parse sqarfs --help: options {opts}, -o keys {keys}")
    options = section(render(SQARFS_PAGE), "OPTIONS")
    gone = missing(opts, options) + [f"-o {k}" for k in missing(keys, options)]
    if gone:
        raise AssertionError(f"sqarfs(8) OPTIONS lacks {gone}")
    log(f"sqarfs: {len(opts)} options and {len(keys)} -o keys checked")


def test_exit_status_documented():
    for page, codes in ((SQAR_PAGE, ("0", "1", "2")), (SQARFS_PAGE, ("0", "1"))):
        body = section(render(page), "EXIT STATUS")
        absent = [c for c in codes if not re.search(r"^\s+" + c + r"\s", body, re.M)]
        if absent:
            raise AssertionError(f"{page}: EXIT STATUS does not describe {absent}")


def test_cmake_install_puts_pages_in_mandir():
    build_dir = os.path.dirname(os.path.dirname(os.path.abspath(SQAR)))
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        skip(f"{SQAR} is not inside a CMake build directory, so there is nothing to install")
    need_tool("cmake")
    with tempdir() as prefix:
        run(["cmake", "--install", build_dir, "--prefix", prefix])
        for rel in ("share/man/man1/sqar.1", "share/man/man8/sqarfs.8", "bin/sqar"):
            path = os.path.join(prefix, rel)
            if not os.path.isfile(path):
                raise AssertionError(f"cmake --install did not install {rel}")
        with open(os.path.join(prefix, "share/man/man1/sqar.1"), "rb") as a, open(SQAR_PAGE, "rb") as b:
            if a.read() != b.read():
                raise AssertionError("the installed sqar.1 differs from man/sqar.1")


if __name__ == "__main__":
    if shutil.which("groff") is None:
        skip("groff is not installed (apt-get install groff-base)")
    main([test_pages_render_without_warnings, test_sqar_page_has_every_command_and_option,
          test_sqarfs_page_has_every_option, test_exit_status_documented, test_cmake_install_puts_pages_in_mandir])
