// FUSE over io_uring: requests arrive in per-CPU ring queues instead of through read() on
// /dev/fuse, and each queue is served by a thread pinned to that CPU.
//
// Why: every FUSE round trip through /dev/fuse wakes a daemon thread, usually on the other
// core, and then the client on its core. In this VM an idle core halts at once, so each of
// those wake-ups is an inter-processor interrupt plus a VM exit; reading every file of the
// ports tree makes ~200k round trips and spent a quarter of the daemon's CPU waking clients
// (docs/DESIGN.md). With io_uring the kernel puts a client's request in the queue of the
// CPU the client runs on, and the thread pinned there answers it: the hand-offs stay on one
// core.
//
// Opt-in (-o uring=on|auto): with one queue thread per CPU, a single client is moved to
// the other CPU by the scheduler on nearly every reply and reads 2x slower than through
// /dev/fuse, while concurrent clients gain (docs/DESIGN.md).
// Needs a kernel with CONFIG_FUSE_IO_URING (6.14+) and /sys/module/fuse/parameters/enable_uring
// set to Y by the administrator; Debian 12's libfuse 3.14 predates it, so this file does the
// protocol's part libfuse would: it asks for io_uring in the INIT reply, registers the ring
// entries, turns each ring request into the /dev/fuse form libfuse's request handling
// takes, and captures the reply into the ring entry. /dev/fuse keeps serving what never
// goes through the ring (INIT, FORGET, INTERRUPT) and the daemon's notifications.
#pragma once
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include <memory>
#include <string>

namespace sqar::fuse {

enum class UringMode { off, automatic, on };

// Whether this kernel lets FUSE use io_uring now ("" when it does, else why not).
std::string uring_unavailable_reason();

class UringTransport {
 public:
  virtual ~UringTransport() = default;
  // Stops the ring threads (after the /dev/fuse loop ended: unmount or signal).
  virtual void stop() = 0;
  // Whether requests are being served through io_uring (INIT negotiated it and the ring
  // queues registered).
  virtual bool active() const = 0;
};

// Hooks the session's /dev/fuse reads and writes (call after fuse_session_mount, before the
// request loop). With mode off it does nothing and returns null. Otherwise the INIT reply
// asks for io_uring when the kernel offers it, and the ring threads start once INIT is done;
// when the kernel does not offer it, requests keep coming through /dev/fuse (mode on: a log
// line says why).
std::unique_ptr<UringTransport> install_uring_transport(fuse_session* se, UringMode mode);

}  // namespace sqar::fuse
