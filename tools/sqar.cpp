// `sqar`: dispatches to the sub-commands registered by cmd_*.cpp.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include "command.h"
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
  std::fprintf(out, "\nRun 'sqar COMMAND --help' for a command's options; 'sqar --version' (-V) prints the version.\n");
}

}  // namespace

int main(int argc, char** argv) {
  sqar::raise_open_file_limit();
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage(stdout);
    return 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V")) {
    std::printf("sqar %s\n", SQAR_VERSION);
    return 0;
  }
  for (const auto& c : sqar::cli::command_registry()) {
    if (!std::strcmp(argv[1], c.name)) {
      try {
        return c.main(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sqar %s: %s\n", c.name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "sqar: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return 2;
}
