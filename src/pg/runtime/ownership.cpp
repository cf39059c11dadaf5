// Session-bound ownership. A claiming session holds one session-level lock
// (not one per job, which would exhaust the lock table) in an advisory key
// space of pg_wf's own (advisory_locks.hpp), so no application lock can
// collide with it.
// The reaper tests the lock: if nobody holds it, the owner is gone.
#include "pg/runtime/ownership.hpp"
#include "pg/base/advisory_locks.hpp"
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/worker_registry.hpp"

extern "C" {
#include "common/pg_prng.h"
}

namespace wf::pg {

namespace {

int64 owner_key = 0;
bool exit_hook_installed = false;

LOCKTAG owner_lock_tag(int64 key) {
    return advisory_lock_tag(LockSpace::session_owner, static_cast<uint64>(key));
}

// Runs before the session's locks are released at exit. Releasing the owner
// lock here, then waking the reaper, lets it recover this session's jobs
// within milliseconds instead of at its next sweep.
void on_session_exit(int, Datum) {
    if (owner_key == 0) return;
    LOCKTAG tag = owner_lock_tag(owner_key);
    if (LockHeldByMe(&tag, ExclusiveLock)) LockRelease(&tag, ExclusiveLock, true);
    wake_database_worker(MyDatabaseId);
}

}  // namespace

int64 session_owner_key() {
    // Positive: the keys of Citus origins are negative (citus/ownership.hpp).
    while (owner_key == 0)
        owner_key = static_cast<int64>(pg_prng_uint64(&pg_global_prng_state) >> 1);
    return owner_key;
}

void ensure_session_holds_owner_lock(int64 origin_key) {
    if (origin_key != 0 && origin_key != owner_key) {
        if (owner_key != 0) {
            LOCKTAG old = owner_lock_tag(owner_key);
            if (LockHeldByMe(&old, ExclusiveLock)) LockRelease(&old, ExclusiveLock, true);
        }
        owner_key = origin_key;
    }
    LOCKTAG tag = owner_lock_tag(session_owner_key());
    // Checked on every claim: pg_advisory_unlock_all() or DISCARD ALL drop it.
    if (LockHeldByMe(&tag, ExclusiveLock)) return;
    if (exit_hook_installed && origin_key == 0) {
        // The lock was dropped: jobs claimed under the old key are (rightly)
        // recovered by the reaper. New claims get a new key, so that a
        // sweep that saw the old key free cannot take them.
        owner_key = 0;
        tag = owner_lock_tag(session_owner_key());
    }
    // Another backend serving the same client may hold an origin key.
    (void)LockAcquire(&tag, ExclusiveLock, true, origin_key != 0);
    if (!exit_hook_installed) {
        before_shmem_exit(on_session_exit, 0);
        exit_hook_installed = true;
        // A first claim in a database the launcher does not serve yet.
        if (shared_memory_ready() && !database_worker_alive(MyDatabaseId)) wake_launcher();
    }
}

bool owner_is_alive(int64 key) {
    if (key == owner_key) return true;  // our own lock never conflicts with us
    LOCKTAG tag = owner_lock_tag(key);
    LockAcquireResult r = LockAcquire(&tag, ShareLock, false, true);
    if (r == LOCKACQUIRE_NOT_AVAIL) return true;
    LockRelease(&tag, ShareLock, false);
    return false;
}

}  // namespace wf::pg
