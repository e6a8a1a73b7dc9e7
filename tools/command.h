// Sub-command registry for the `sqar` binary: each cmd_*.cpp registers one command.
#pragma once
#include <string>
#include <vector>

namespace sqar::cli {

using CommandMain = int (*)(int argc, char** argv);  // argv[0] is the command name

struct Command {
  const char* name;
  const char* summary;
  CommandMain main;
};

std::vector<Command>& command_registry();

struct RegisterCommand {
  RegisterCommand(const char* name, const char* summary, CommandMain main) {
    command_registry().push_back({name, summary, main});
  }
};

}  // namespace sqar::cli
