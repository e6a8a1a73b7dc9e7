// The loop that serves FUSE requests: one listener at a time keeps polling /dev/fuse briefly
// after each request, because waking a sleeping thread costs a VM exit on hosts whose idle CPUs
// halt (docs/architecture.md, "Its own request loop", "One listener group per CPU").
//
// Threads take turns as the listener (leader/followers: the others wait on a mutex, not on
// /dev/fuse, so a request wakes nobody). With several CPUs they form one group per CPU,
// pinned to it; the extra groups listen only while several client threads send requests
// (RequestLoop::groups_). The listener passes its role on before a request decompresses a
// block (yield_listener_role), or reads metadata after running for a while
// (yield_listener_role_if_slow), so slow requests of concurrent clients run in parallel, and with
// handoff_on_queue also whenever requests queue up (a wake-up each, so only worth it above 2
// CPUs). The spin window adapts to the client's pace (RequestLoop::adapt_spin), so an idle or
// slow client costs no polling. `spin=0` uses libfuse's own loop instead (fuse/main.cpp).
#pragma once
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include <chrono>

namespace sqar::fuse {

// Serves requests until fuse_session_exited (unmount, SIGINT/SIGTERM/SIGHUP). Returns 0, or
// 1 when the threads could not be started.
int run_request_loop(fuse_session* se, unsigned threads, std::chrono::microseconds spin, bool handoff_on_queue);

// For request handlers about to do slow work (read and decompress a block): if the calling
// thread is the listener, another thread takes over listening meanwhile. No-op elsewhere.
void yield_listener_role();

// For request handlers about to do work that is usually quick but may add up (read a metadata
// block): yields as above once the request has run for over a millisecond.
void yield_listener_role_if_slow();

}  // namespace sqar::fuse
