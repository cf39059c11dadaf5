// The per-database reaper workers, as the launcher, the workers themselves
// and exiting sessions see them (shared memory). Plain C-style code: none of
// these throws; those that can ereport are called through wf::pg::call().
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

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
// After a DROP DATABASE that succeeded: its slot is free at once, instead
// of held off until the hold-off ends.
void forget_dropped_database(Oid database);
void register_launcher();
void wake_launcher();
bool take_launcher_request();  // true once after wake_launcher()

// Its part of pg_wf's shared memory segment (see shared_memory.hpp).
Size worker_registry_size();
void worker_registry_init(void* at, bool found);

}  // namespace wf::pg
