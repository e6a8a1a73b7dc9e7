// The loop that serves FUSE requests: a fixed pool of threads, one listener at a time, and
// a short spin on /dev/fuse after each request instead of sleeping at once.
//
// Why not fuse_session_loop_mt: there every idle thread sleeps in read(/dev/fuse), so each
// request wakes a thread, usually on another core. In a virtual machine whose idle cores
// halt (no guest halt polling), that wake-up is an inter-processor interrupt and a VM
// exit, paid twice per round trip (request and reply). A walk of the ports image spent
// more than half its time there: 5.5-7.8 s against 2.3-2.5 s with the daemon and the walker
// pinned to one core. A listener that keeps reading (non-blocking) for a short while after
// each request finds the next one of a busy client without being woken: 3.0-3.3 s.
//
// Threads take turns as the listener (leader/followers; the others wait on a mutex, not on
// /dev/fuse, so a request wakes nobody). With several CPUs the threads form one such group
// per CPU, pinned to it; the extra groups listen only while several client threads send
// requests, so each client is answered on its own CPU (RequestLoop::groups_). The listener passes its role on before a request
// decompresses a block (yield_listener_role), so slow reads of concurrent clients run in
// parallel. With handoff_on_queue it also does whenever more requests are queued, so cached
// requests of many clients run in parallel too; each hand-off wakes a sleeping thread, which
// on 2 cores cost more than it gave (read all on ports 5.02 -> 4.61 s without, medians of 7
// interleaved runs): sqarfs -o handoff=auto turns it on only with more than 2 CPUs. The spin yields the core to runnable client threads and
// stops at most `spin` after the last request; the window adapts to the client's pace (see
// RequestLoop::adapt_spin), so an idle or slow client costs no polling. `spin=0`: libfuse's
// own loop is used instead (fuse/main.cpp).
#pragma once
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include <chrono>

namespace sqar::fuse {

// Serves requests until the session exits (unmount, SIGINT/SIGTERM/SIGHUP). Returns 0, or
// 1 when the threads could not be started.
int run_request_loop(fuse_session* se, unsigned threads, std::chrono::microseconds spin, bool handoff_on_queue);

// For request handlers about to do slow work (read and decompress a block): if the calling
// thread is the listener, another thread takes over listening meanwhile. No-op elsewhere.
void yield_listener_role();

}  // namespace sqar::fuse
