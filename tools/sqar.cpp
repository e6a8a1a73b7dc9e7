// `sqar`: dispatches to the sub-commands registered by cmd_*.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "command.h"
#include "common/display_name.h"
#include "common/open_file_limit.h"
#include "sqar_version.h"

namespace sqar::cli {
std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace sqar::cli

namespace {

void print_usage(FILE* out) {
  auto commands = sqar::cli::command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return std::strcmp(a.name, b.name) < 0; });
  std::fprintf(out,
               "sqar - deduplicating SquashFS archiver\n\n"
               "Usage: sqar COMMAND [OPTIONS] ...\n\nCommands:\n");
  for (const auto& c : commands) std::fprintf(out, "  %-9s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\nRun 'sqar COMMAND --help' or 'sqar help COMMAND' for a command's options; 'sqar --version'\n"
               "(-V) prints the version.\n\n"
               "Exit status: 0 on success; 1 when something is wrong (damage found by verify, an entry\n"
               "that failed; for diff: the trees differ); 2 on bad usage or an unknown command (for\n"
               "diff also on errors). Each command's --help gives its own.\n");
}

const sqar::cli::Command* find_command(const char* name) {
  for (const auto& c : sqar::cli::command_registry())
    if (!std::strcmp(name, c.name)) return &c;
  return nullptr;
}

int run_command(const sqar::cli::Command& c, int argc, char** argv) {
  try {
    return c.main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sqar %s: %s\n", c.name, sqar::printable(e.what()).c_str());
    return 1;
  }
}

// An option before any command (`sqar -x`) is not a command name: one line each, as a bad
// option of a command gets, instead of the whole usage.
int unknown_command(const char* name) {
  if (name[0] == '-') {
    std::fprintf(stderr, "sqar: unknown option '%s' (options follow a command: sqar COMMAND [OPTIONS])\n", name);
    std::fprintf(stderr, "Try 'sqar --help' for the commands.\n");
    return 2;
  }
  std::fprintf(stderr, "sqar: unknown command '%s'\n\n", name);
  print_usage(stderr);
  return 2;
}

// A closed standard descriptor (`sqar create dir - >&-`) would be handed to the first file
// sqar opens, and what is meant for standard output would be written into that file, or the
// file taken for standard output. Each closed one gets /dev/null opened the wrong way round,
// so that using it still fails with EBADF, as it would have.
void reserve_closed_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int got = open("/dev/null", (fd == 0 ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
    if (got >= 0 && got != fd) close(got);  // only if a lower one was taken meanwhile: none here
  }
}

}  // namespace

int main(int argc, char** argv) {
  reserve_closed_standard_descriptors();
  sqar::raise_open_file_limit();
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "help") && argc > 2) {  // `sqar help CMD` = `sqar CMD --help`
    const auto* c = find_command(argv[2]);
    if (!c) return unknown_command(argv[2]);
    char help_flag[] = "--help";
    char* help_argv[] = {argv[2], help_flag, nullptr};
    return run_command(*c, 2, help_argv);
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage(stdout);
    return 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V")) {
    std::printf("sqar %s\n", SQAR_VERSION);
    return 0;
  }
  if (const auto* c = find_command(argv[1])) return run_command(*c, argc - 1, argv + 1);
  return unknown_command(argv[1]);
}
