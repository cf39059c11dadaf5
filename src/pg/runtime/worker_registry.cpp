// The per-database reaper workers and the launcher, in pg_wf's shared
// memory: which worker serves which database, and what each was woken for.
#include "pg/runtime/worker_registry.hpp"

namespace wf::pg {

namespace {

struct DatabaseWorker {
    Oid database;          // InvalidOid: free slot
    pid_t pid;             // 0 while no worker runs
    Latch* latch;
    bool no_extension;     // last worker found no pg_wf here
    TimestampTz checked_at;
    TimestampTz dropping_until;  // DROP DATABASE in progress: start no worker
    bool sweep_requested;        // a session exited: recover its jobs now
    bool releases_requested;     // completions left releases for the worker
};

struct Registry {
    slock_t mutex;  // guards the launcher fields and workers[]
    Latch* launcher_latch;
    bool launcher_requested;
    int worker_slots;
    // followed by DatabaseWorker[worker_slots]
};

Registry* registry = nullptr;  // null without shared_preload_libraries

int worker_slot_count() { return max_worker_processes; }

DatabaseWorker* workers() {
    return reinterpret_cast<DatabaseWorker*>(reinterpret_cast<char*>(registry) +
                                             MAXALIGN(sizeof(Registry)));
}

DatabaseWorker* find_worker(Oid database) {
    for (int i = 0; i < registry->worker_slots; i++)
        if (workers()[i].database == database) return &workers()[i];
    return nullptr;
}

// A slot for `database`: its own, a free one, or else the one of a
// database no worker serves now (a database dropped, or one found without
// pg_wf), the longest unchecked first. A slot held off for a DROP DATABASE
// (10 s) is never taken: its database could get a reaper again. Slots are
// as many as max_worker_processes, so a running worker gets one unless
// drops hold all the others; what a reused slot forgets is only that its
// database lacked pg_wf (the launcher looks again).
DatabaseWorker* find_or_add_worker(Oid database) {
    if (DatabaseWorker* w = find_worker(database)) return w;
    DatabaseWorker* reuse = nullptr;
    TimestampTz now = GetCurrentTimestamp();
    for (int i = 0; i < registry->worker_slots; i++) {
        DatabaseWorker* w = &workers()[i];
        if (w->database == InvalidOid) {
            reuse = w;
            break;
        }
        if (w->pid == 0 && w->dropping_until <= now && (reuse == nullptr || w->checked_at < reuse->checked_at))
            reuse = w;
    }
    if (reuse != nullptr) {
        memset(reuse, 0, sizeof *reuse);
        reuse->database = database;
    }
    return reuse;
}

}  // namespace

Size worker_registry_size() {
    return add_size(MAXALIGN(sizeof(Registry)),
                    mul_size(sizeof(DatabaseWorker), worker_slot_count()));
}

void worker_registry_init(void* at, bool found) {
    registry = static_cast<Registry*>(at);
    if (found) return;
    memset(registry, 0, worker_registry_size());
    SpinLockInit(&registry->mutex);
    registry->worker_slots = worker_slot_count();
}

void register_database_worker(Oid database) {
    if (!registry) return;
    SpinLockAcquire(&registry->mutex);
    if (DatabaseWorker* w = find_or_add_worker(database)) {
        w->pid = MyProcPid;
        w->latch = MyLatch;
        w->no_extension = false;
    }
    SpinLockRelease(&registry->mutex);
}

void unregister_database_worker(bool no_extension) {
    if (!registry) return;
    SpinLockAcquire(&registry->mutex);
    // Where pg_wf is missing, that is remembered even if the slot went to
    // another database meanwhile.
    DatabaseWorker* w = no_extension ? find_or_add_worker(MyDatabaseId) : find_worker(MyDatabaseId);
    if (w != nullptr) {
        if (w->pid == MyProcPid) {
            w->pid = 0;
            w->latch = nullptr;
        }
        w->no_extension = no_extension;
        w->checked_at = GetCurrentTimestamp();
    }
    SpinLockRelease(&registry->mutex);
}

bool database_worker_alive(Oid database) {
    if (!registry) return false;
    SpinLockAcquire(&registry->mutex);
    DatabaseWorker* w = find_worker(database);
    bool alive = w != nullptr && w->pid != 0;
    SpinLockRelease(&registry->mutex);
    return alive;
}

bool database_lacks_extension(Oid database, TimestampTz* checked_at) {
    if (!registry) return false;
    SpinLockAcquire(&registry->mutex);
    DatabaseWorker* w = find_worker(database);
    bool lacks = w != nullptr && w->pid == 0 && w->no_extension;
    if (lacks) *checked_at = w->checked_at;
    SpinLockRelease(&registry->mutex);
    return lacks;
}

namespace {
void wake_worker_for(Oid database, bool DatabaseWorker::*request) {
    if (!registry) return;
    SpinLockAcquire(&registry->mutex);
    DatabaseWorker* w = find_worker(database);
    Latch* latch = (w != nullptr && w->pid != 0) ? w->latch : nullptr;
    if (latch) w->*request = true;
    SpinLockRelease(&registry->mutex);
    if (latch) SetLatch(latch);
}
}  // namespace

void wake_database_worker(Oid database) {
    wake_worker_for(database, &DatabaseWorker::sweep_requested);
}

void wake_database_worker_for_releases(Oid database) {
    wake_worker_for(database, &DatabaseWorker::releases_requested);
}

void take_worker_requests(bool* sweep, bool* releases) {
    *sweep = *releases = false;
    if (!registry) return;
    SpinLockAcquire(&registry->mutex);
    if (DatabaseWorker* w = find_worker(MyDatabaseId)) {
        *sweep = w->sweep_requested;
        *releases = w->releases_requested;
        w->sweep_requested = w->releases_requested = false;
    }
    SpinLockRelease(&registry->mutex);
}

void stop_database_worker(Oid database) {
    if (!registry) return;
    constexpr long kHoldOffMs = 10 * 1000;
    SpinLockAcquire(&registry->mutex);
    DatabaseWorker* w = find_or_add_worker(database);
    pid_t pid = 0;
    if (w) {
        w->dropping_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kHoldOffMs);
        pid = w->pid;
    }
    SpinLockRelease(&registry->mutex);
    if (pid == 0) return;
    kill(pid, SIGTERM);
    // Wait (up to 5 s, as DROP DATABASE itself would) for it to leave.
    for (int i = 0; i < 500 && database_worker_alive(database); i++) {
        CHECK_FOR_INTERRUPTS();
        pg_usleep(10 * 1000L);
    }
}

void forget_dropped_database(Oid database) {
    if (!registry) return;
    SpinLockAcquire(&registry->mutex);
    DatabaseWorker* w = find_worker(database);
    // No worker runs in a database that is gone (the DROP waited for it
    // to leave); one exiting late finds no slot, which is harmless.
    if (w != nullptr) memset(w, 0, sizeof *w);
    SpinLockRelease(&registry->mutex);
}

bool database_being_dropped(Oid database) {
    if (!registry) return false;
    SpinLockAcquire(&registry->mutex);
    DatabaseWorker* w = find_worker(database);
    bool dropping = w != nullptr && w->dropping_until > GetCurrentTimestamp();
    SpinLockRelease(&registry->mutex);
    return dropping;
}

void register_launcher() {
    if (!registry) return;
    SpinLockAcquire(&registry->mutex);
    registry->launcher_latch = MyLatch;
    SpinLockRelease(&registry->mutex);
}

void wake_launcher() {
    if (!registry) return;
    SpinLockAcquire(&registry->mutex);
    registry->launcher_requested = true;
    Latch* latch = registry->launcher_latch;
    SpinLockRelease(&registry->mutex);
    if (latch) SetLatch(latch);
}

bool take_launcher_request() {
    if (!registry) return false;
    SpinLockAcquire(&registry->mutex);
    bool requested = registry->launcher_requested;
    registry->launcher_requested = false;
    SpinLockRelease(&registry->mutex);
    return requested;
}

}  // namespace wf::pg
