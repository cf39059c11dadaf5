#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/worker_registry.hpp"
#include "pg/runtime/wakeup.hpp"

extern "C" {
#include "access/twophase.h"
#include "storage/pg_shmem.h"
}

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

struct WaiterSlot {
    pg_atomic_uint32 active;
    Oid database;
    uint32 queue_hash;
};

struct SharedState {
    slock_t mutex;  // guards launcher fields and workers[]
    Latch* launcher_latch;
    bool launcher_requested;
    int worker_slots;
    int waiter_slots;
    // followed by DatabaseWorker[worker_slots] and WaiterSlot[waiter_slots]
};

SharedState* shared = nullptr;
shmem_request_hook_type previous_request_hook = nullptr;
shmem_startup_hook_type previous_startup_hook = nullptr;

int worker_slot_count() { return max_worker_processes; }
// Indexed by pgprocno: backends, auxiliary processes and prepared xacts.
int proc_slot_count() { return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts; }

Size shared_size() {
    Size size = MAXALIGN(sizeof(SharedState));
    size = add_size(size, MAXALIGN(mul_size(sizeof(DatabaseWorker), worker_slot_count())));
    size = add_size(size, mul_size(sizeof(WaiterSlot), proc_slot_count()));
    return size;
}

DatabaseWorker* workers() {
    return reinterpret_cast<DatabaseWorker*>(reinterpret_cast<char*>(shared) +
                                             MAXALIGN(sizeof(SharedState)));
}

WaiterSlot* waiters() {
    return reinterpret_cast<WaiterSlot*>(
        reinterpret_cast<char*>(workers()) +
        MAXALIGN(sizeof(DatabaseWorker) * shared->worker_slots));
}

void on_shmem_request() {
    if (previous_request_hook) previous_request_hook();
    RequestAddinShmemSpace(shared_size());
}

void on_shmem_startup() {
    if (previous_startup_hook) previous_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    shared = static_cast<SharedState*>(ShmemInitStruct("pg_wf", shared_size(), &found));
    if (!found) {
        memset(shared, 0, shared_size());
        SpinLockInit(&shared->mutex);
        shared->worker_slots = worker_slot_count();
        shared->waiter_slots = proc_slot_count();
        for (int i = 0; i < shared->waiter_slots; i++) pg_atomic_init_u32(&waiters()[i].active, 0);
    }
    LWLockRelease(AddinShmemInitLock);
}

DatabaseWorker* find_worker(Oid database) {
    for (int i = 0; i < shared->worker_slots; i++)
        if (workers()[i].database == database) return &workers()[i];
    return nullptr;
}

DatabaseWorker* find_or_add_worker(Oid database) {
    if (DatabaseWorker* w = find_worker(database)) return w;
    for (int i = 0; i < shared->worker_slots; i++) {
        DatabaseWorker* w = &workers()[i];
        if (w->database == InvalidOid) {
            memset(w, 0, sizeof *w);
            w->database = database;
            return w;
        }
    }
    return nullptr;
}

}  // namespace

void request_shared_memory() {
    previous_request_hook = shmem_request_hook;
    shmem_request_hook = on_shmem_request;
    previous_startup_hook = shmem_startup_hook;
    shmem_startup_hook = on_shmem_startup;
}

bool shared_memory_ready() { return shared != nullptr; }

void register_database_worker(Oid database) {
    if (!shared) return;
    SpinLockAcquire(&shared->mutex);
    if (DatabaseWorker* w = find_or_add_worker(database)) {
        w->pid = MyProcPid;
        w->latch = MyLatch;
        w->no_extension = false;
    }
    SpinLockRelease(&shared->mutex);
}

void unregister_database_worker(bool no_extension) {
    if (!shared) return;
    SpinLockAcquire(&shared->mutex);
    if (DatabaseWorker* w = find_worker(MyDatabaseId)) {
        if (w->pid == MyProcPid) {
            w->pid = 0;
            w->latch = nullptr;
        }
        w->no_extension = no_extension;
        w->checked_at = GetCurrentTimestamp();
    }
    SpinLockRelease(&shared->mutex);
}

bool database_worker_alive(Oid database) {
    if (!shared) return false;
    SpinLockAcquire(&shared->mutex);
    DatabaseWorker* w = find_worker(database);
    bool alive = w != nullptr && w->pid != 0;
    SpinLockRelease(&shared->mutex);
    return alive;
}

bool database_lacks_extension(Oid database, TimestampTz* checked_at) {
    if (!shared) return false;
    SpinLockAcquire(&shared->mutex);
    DatabaseWorker* w = find_worker(database);
    bool lacks = w != nullptr && w->pid == 0 && w->no_extension;
    if (lacks) *checked_at = w->checked_at;
    SpinLockRelease(&shared->mutex);
    return lacks;
}

namespace {
void wake_worker_for(Oid database, bool DatabaseWorker::*request) {
    if (!shared) return;
    SpinLockAcquire(&shared->mutex);
    DatabaseWorker* w = find_worker(database);
    Latch* latch = (w != nullptr && w->pid != 0) ? w->latch : nullptr;
    if (latch) w->*request = true;
    SpinLockRelease(&shared->mutex);
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
    if (!shared) return;
    SpinLockAcquire(&shared->mutex);
    if (DatabaseWorker* w = find_worker(MyDatabaseId)) {
        *sweep = w->sweep_requested;
        *releases = w->releases_requested;
        w->sweep_requested = w->releases_requested = false;
    }
    SpinLockRelease(&shared->mutex);
}

void stop_database_worker(Oid database) {
    if (!shared) return;
    constexpr long kHoldOffMs = 10 * 1000;
    SpinLockAcquire(&shared->mutex);
    DatabaseWorker* w = find_or_add_worker(database);
    pid_t pid = 0;
    if (w) {
        w->dropping_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kHoldOffMs);
        pid = w->pid;
    }
    SpinLockRelease(&shared->mutex);
    if (pid == 0) return;
    kill(pid, SIGTERM);
    // Wait (up to 5 s, as DROP DATABASE itself would) for it to leave.
    for (int i = 0; i < 500 && database_worker_alive(database); i++) {
        CHECK_FOR_INTERRUPTS();
        pg_usleep(10 * 1000L);
    }
}

bool database_being_dropped(Oid database) {
    if (!shared) return false;
    SpinLockAcquire(&shared->mutex);
    DatabaseWorker* w = find_worker(database);
    bool dropping = w != nullptr && w->dropping_until > GetCurrentTimestamp();
    SpinLockRelease(&shared->mutex);
    return dropping;
}

void register_launcher() {
    if (!shared) return;
    SpinLockAcquire(&shared->mutex);
    shared->launcher_latch = MyLatch;
    SpinLockRelease(&shared->mutex);
}

void wake_launcher() {
    if (!shared) return;
    SpinLockAcquire(&shared->mutex);
    shared->launcher_requested = true;
    Latch* latch = shared->launcher_latch;
    SpinLockRelease(&shared->mutex);
    if (latch) SetLatch(latch);
}

bool take_launcher_request() {
    if (!shared) return false;
    SpinLockAcquire(&shared->mutex);
    bool requested = shared->launcher_requested;
    shared->launcher_requested = false;
    SpinLockRelease(&shared->mutex);
    return requested;
}

// ---- waiter slots; the logic is in wakeup.cpp ----

void begin_waiting(uint32 hash) {
    if (!shared || MyProc == nullptr || MyProc->pgprocno >= shared->waiter_slots) return;
    WaiterSlot* slot = &waiters()[MyProc->pgprocno];
    slot->database = MyDatabaseId;
    slot->queue_hash = hash;
    pg_write_barrier();
    pg_atomic_write_u32(&slot->active, 1);
    // The claim that follows must see every commit that did not see this slot.
    pg_memory_barrier();
}

void end_waiting() {
    if (!shared || MyProc == nullptr || MyProc->pgprocno >= shared->waiter_slots) return;
    pg_atomic_write_u32(&waiters()[MyProc->pgprocno].active, 0);
}

void wake_waiters(const uint32* hashes, int count, bool all) {
    if (!shared) return;
    pg_memory_barrier();
    WaiterSlot* slots = waiters();
    for (int i = 0; i < shared->waiter_slots; i++) {
        if (pg_atomic_read_u32(&slots[i].active) == 0) continue;
        pg_read_barrier();
        if (slots[i].database != MyDatabaseId) continue;
        bool match = all;
        for (int h = 0; !match && h < count; h++) match = slots[i].queue_hash == hashes[h];
        if (match) SetLatch(&ProcGlobal->allProcs[i].procLatch);
    }
}

}  // namespace wf::pg
