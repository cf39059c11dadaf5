// Commit-time wake-ups of waiting claimers, the worker and the launcher.
// Plain C-style code: none of these throws or ereports.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// From _PG_init, so that noting a queue never allocates or fails.
void register_wakeup_callback();
uint32 queue_hash(const char* queue, size_t length);
// Jobs became ready in this queue: waiting claimers are woken once the
// current transaction commits (never before, never on abort).
void note_queue_ready(const char* queue, size_t length);
inline void note_queue_ready(std::string_view queue) { note_queue_ready(queue.data(), queue.size()); }
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

// Result waits (wf_wait_job, wf_wait_workflow). A job that ended notes
// its id's hash, and its workflow's: their waiters are woken once the
// current transaction commits. A commit with no waiter anywhere scans no
// slot.
uint32 job_result_hash(int64 id);
uint32 workflow_result_hash(const pg_uuid_t& id);
void note_result_ready(uint32 hash);
// Whether any session waits for a result now. When none does, a job that
// ends need not hash its ids: it notes that it did not, and its commit then
// wakes every result waiter of the database, in case one registered since.
bool result_waiters_present();
void note_results_unhashed();
// Registers this session as waiting for `hash` (end_waiting() ends it);
// false without pg_wf's shared memory (the waiter must then poll).
bool begin_waiting_for_result(uint32 hash);
void wake_result_waiters(const uint32* hashes, int count, bool all);

// Its part of pg_wf's shared memory segment (see shared_memory.hpp).
Size waiter_slots_size();
void waiter_slots_init(void* at, bool found);

}  // namespace wf::pg
