// Interruptions a command finishes in an orderly way instead of dying mid-write: extract sets
// the metadata of the directories it made before it ends, so a Ctrl-C leaves a tree whose
// modes and times are the image's, not sqar's private 0700 and the time of the interruption.
#pragma once
#include <atomic>

namespace sqar::cli {

// From now on the first SIGINT, SIGTERM or SIGHUP sets the returned flag and nothing else; it
// also puts the signal's default action back, so a second one ends the process at once. A
// signal the caller ignores stays ignored (nohup, a shell's background job), as tar leaves it.
const std::atomic<bool>& stop_on_interrupt_signals();

// The signal that set the flag, or 0.
int interrupt_signal();

// Ends the process by the signal that set the flag, as it would have ended without
// stop_on_interrupt_signals(): the caller's shell sees "killed by SIGINT" and stops a script
// or a loop as it does for any interrupted command. Returns when no signal set the flag.
void end_by_interrupt_signal();

}  // namespace sqar::cli
