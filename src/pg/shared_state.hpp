// Process-wide state of pg_wf: shared memory (present only when the library
// is in shared_preload_libraries), session ownership and claim wake-ups.
// These functions are plain C-style code: none of them throws, and those that
// can ereport are called through wf::pg::call() from C++.
#pragma once

#include "postgres.hpp"

namespace wf::pg {

// ---- shared memory (shared_state.cpp) ----
void request_shared_memory();  // from _PG_init, when preloading
bool shared_memory_ready();     // false without shared_preload_libraries

// Per-database reaper workers, looked up by the launcher and by exiting sessions.
void register_database_worker(Oid database);
void unregister_database_worker(bool no_extension);
bool database_worker_alive(Oid database);
bool database_lacks_extension(Oid database, TimestampTz* checked_at);
// Wakes the database's worker for a full pass (a session with claims ended).
void wake_database_worker(Oid database);
// Wakes it to apply the releases completions left in wf.release_debt.
void wake_database_worker_for_releases(Oid database);
// The worker: what it was woken for since the last call.
void take_worker_requests(bool* sweep, bool* releases);
// Before DROP DATABASE: stops the database's worker, waits for it to leave
// and keeps the launcher from starting another one for a while.
void stop_database_worker(Oid database);
bool database_being_dropped(Oid database);
void register_launcher();
void wake_launcher();
bool take_launcher_request();  // true once after wake_launcher()

// ---- ownership (ownership.cpp) ----
// The key of this session's advisory lock, held from its first claim to its
// exit. Stored in wf.job.owner_session.
int64 session_owner_key();
void ensure_session_holds_owner_lock();
// True if the session with that key still holds its lock. The reaper's test.
bool owner_is_alive(int64 owner_key);

// ---- wake-ups (wakeup.cpp) ----
// From _PG_init, so that noting a queue never allocates or fails.
void register_wakeup_callback();
uint32 queue_hash(const char* queue, size_t length);
// Jobs became ready in this queue: waiting claimers are woken once the
// current transaction commits (never before, never on abort).
void note_queue_ready(const char* queue, size_t length);
// A claimer waiting on a queue registers itself, then sleeps on its latch.
void begin_waiting(uint32 queue_hash);
void end_waiting();
// CREATE EXTENSION: the launcher is woken once the current transaction
// commits (before, a worker it starts would not see the extension yet).
void wake_launcher_at_commit();
// Releases were left for the worker: it is woken once the current
// transaction commits.
void note_releases_deferred();
// After commit: sets the latch of claimers waiting on one of `hashes`
// (or on any queue of this database when `all`).
void wake_waiters(const uint32* hashes, int count, bool all);

}  // namespace wf::pg
