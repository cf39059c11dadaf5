// Wake-ups without NOTIFY: NOTIFY serialises every committing transaction on
// one lock. Instead a transaction that made jobs ready remembers the queues,
// and after its commit sets the latch of the claimers waiting on them.
#include "pg/runtime/wakeup.hpp"
#include "pg/runtime/worker_registry.hpp"

extern "C" {
#include "access/twophase.h"
#include "common/hashfn.h"
#include "storage/ipc.h"
}

namespace wf::pg {

namespace {

// One slot per process, indexed by pgprocno: a claimer waiting
// on a queue, seen by the transactions that commit jobs there.
// A slot waits for a queue (a claimer) or for a result (wf_wait_job,
// wf_wait_workflow: the hash of a job id or a workflow id).
enum WaiterKind : uint32 { kQueueWaiter = 1, kResultWaiter = 2 };

struct WaiterSlot {
    pg_atomic_uint32 active;  // 0, or the WaiterKind it waits as
    Oid database;
    uint32 queue_hash;
};

struct WaiterSlots {
    int count;
    // Result waiters of every database: a commit that ended jobs scans the
    // slots for them only when there is one.
    pg_atomic_uint32 result_waiters;
    // followed by WaiterSlot[count]
};

WaiterSlots* waiting = nullptr;  // null without shared_preload_libraries

// Backends, auxiliary processes and prepared xacts: every pgprocno.
int proc_slot_count() { return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts; }

WaiterSlot* slots() {
    return reinterpret_cast<WaiterSlot*>(reinterpret_cast<char*>(waiting) +
                                         MAXALIGN(sizeof(WaiterSlots)));
}

// This process's slot, or null where it has none.
WaiterSlot* my_slot() {
    if (!waiting || MyProc == nullptr || MyProc->pgprocno >= waiting->count) return nullptr;
    return &slots()[MyProc->pgprocno];
}

constexpr int kMaxNotedQueues = 32;
uint32 noted[kMaxNotedQueues];
int noted_count = 0;
bool noted_overflow = false;  // too many queues: wake every waiter of the database
uint32 noted_results[kMaxNotedQueues];
int noted_result_count = 0;
bool noted_results_overflow = false;  // too many: wake every result waiter of the database
// Jobs ended while no result waiter existed, so their hashes were not
// noted: if a waiter has registered by the commit, it is woken anyway.
bool results_unhashed = false;
bool releases_deferred = false;
bool launcher_wake_noted = false;

// After commit: wakes the claimers of the noted queues, the worker for the
// deferred releases, the launcher after CREATE EXTENSION. Whatever the end,
// the notes are forgotten: a prepared transaction's too, so COMMIT PREPARED
// wakes nobody (waiting claimers find its jobs at their next timeout, the
// worker its debts at its next pass).
void on_transaction_end(XactEvent event, void*) {
    bool noted_any = noted_count > 0 || noted_overflow || releases_deferred || launcher_wake_noted ||
                     noted_result_count > 0 || noted_results_overflow || results_unhashed;
    if (!noted_any) return;
    bool committed = event == XACT_EVENT_COMMIT;
    if (!committed && event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT &&
        event != XACT_EVENT_PREPARE)
        return;
    if (committed) {
        if (noted_count > 0 || noted_overflow) wake_waiters(noted, noted_count, noted_overflow);
        if (noted_result_count > 0 || noted_results_overflow || results_unhashed)
            wake_result_waiters(noted_results, noted_result_count,
                                noted_results_overflow || results_unhashed);
        if (releases_deferred) wake_database_worker_for_releases(MyDatabaseId);
        if (launcher_wake_noted) wake_launcher();
    }
    noted_count = 0;
    noted_overflow = false;
    noted_result_count = 0;
    noted_results_overflow = false;
    results_unhashed = false;
    releases_deferred = false;
    launcher_wake_noted = false;
}

}  // namespace

void register_wakeup_callback() { RegisterXactCallback(on_transaction_end, nullptr); }

uint32 queue_hash(const char* queue, size_t length) {
    return hash_bytes(reinterpret_cast<const unsigned char*>(queue), static_cast<int>(length));
}

void note_releases_deferred() { releases_deferred = true; }

void wake_launcher_at_commit() { launcher_wake_noted = true; }

void note_queue_ready(const char* queue, size_t length) {
    if (!waiting) return;  // no waiters to wake: they poll
    uint32 hash = queue_hash(queue, length);
    for (int i = 0; i < noted_count; i++)
        if (noted[i] == hash) return;
    if (noted_count < kMaxNotedQueues)
        noted[noted_count++] = hash;
    else
        noted_overflow = true;
}

Size waiter_slots_size() {
    return add_size(MAXALIGN(sizeof(WaiterSlots)), mul_size(sizeof(WaiterSlot), proc_slot_count()));
}

void waiter_slots_init(void* at, bool found) {
    waiting = static_cast<WaiterSlots*>(at);
    if (found) return;
    memset(waiting, 0, waiter_slots_size());
    waiting->count = proc_slot_count();
    pg_atomic_init_u32(&waiting->result_waiters, 0);
    for (int i = 0; i < waiting->count; i++) pg_atomic_init_u32(&slots()[i].active, 0);
}

// A backend that exits while it waits (FATAL: terminated, its client gone)
// unwinds no C++ frame: its slot is ended here, or the count of result
// waiters would stay up until a restart.
void end_waiting_at_exit(int, Datum) { end_waiting(); }

void ensure_exit_callback() {
    static bool registered = false;
    if (registered) return;
    before_shmem_exit(end_waiting_at_exit, 0);
    registered = true;
}

void begin_waiting(uint32 hash) {
    WaiterSlot* slot = my_slot();
    if (!slot) return;
    ensure_exit_callback();
    if (pg_atomic_exchange_u32(&slot->active, 0) == kResultWaiter)
        pg_atomic_fetch_sub_u32(&waiting->result_waiters, 1);
    slot->database = MyDatabaseId;
    slot->queue_hash = hash;
    pg_write_barrier();
    pg_atomic_write_u32(&slot->active, kQueueWaiter);
    // The claim that follows must see every commit that did not see this slot.
    pg_memory_barrier();
}

void end_waiting() {
    WaiterSlot* slot = my_slot();
    if (!slot) return;
    if (pg_atomic_exchange_u32(&slot->active, 0) == kResultWaiter)
        pg_atomic_fetch_sub_u32(&waiting->result_waiters, 1);
}

uint32 job_result_hash(int64 id) {
    return hash_bytes_extended(reinterpret_cast<const unsigned char*>(&id), sizeof id, 1) & 0xffffffffu;
}

uint32 workflow_result_hash(const pg_uuid_t& id) {
    return hash_bytes_extended(id.data, UUID_LEN, 2) & 0xffffffffu;
}

bool result_waiters_present() {
    if (!waiting) return false;
    // Read before the job's end commits: a waiter that registers later reads
    // the job after this commit, or is woken by it (note_results_unhashed).
    pg_memory_barrier();
    return pg_atomic_read_u32(&waiting->result_waiters) > 0;
}

void note_results_unhashed() {
    if (waiting) results_unhashed = true;
}

void note_result_ready(uint32 hash) {
    if (!waiting) return;
    for (int i = 0; i < noted_result_count; i++)
        if (noted_results[i] == hash) return;
    if (noted_result_count < kMaxNotedQueues)
        noted_results[noted_result_count++] = hash;
    else
        noted_results_overflow = true;
}

bool begin_waiting_for_result(uint32 hash) {
    WaiterSlot* slot = my_slot();
    if (!slot) return false;
    ensure_exit_callback();
    if (pg_atomic_exchange_u32(&slot->active, 0) == kResultWaiter)
        pg_atomic_fetch_sub_u32(&waiting->result_waiters, 1);
    slot->database = MyDatabaseId;
    slot->queue_hash = hash;
    pg_write_barrier();
    pg_atomic_write_u32(&slot->active, kResultWaiter);
    // A full barrier: the check that follows sees every commit whose
    // wake-up did not see this waiter.
    pg_atomic_fetch_add_u32(&waiting->result_waiters, 1);
    return true;
}

// Sets the latch of this database's waiters of `kind` whose hash is one of
// `hashes` (every one of them when `all`).
static void wake_slots(WaiterKind kind, const uint32* hashes, int count, bool all) {
    WaiterSlot* waiters = slots();
    for (int i = 0; i < waiting->count; i++) {
        if (pg_atomic_read_u32(&waiters[i].active) != kind) continue;
        pg_read_barrier();
        if (waiters[i].database != MyDatabaseId) continue;
        bool match = all;
        for (int h = 0; !match && h < count; h++) match = waiters[i].queue_hash == hashes[h];
        if (match) SetLatch(&ProcGlobal->allProcs[i].procLatch);
    }
}

void wake_result_waiters(const uint32* hashes, int count, bool all) {
    if (!waiting) return;
    pg_memory_barrier();
    if (pg_atomic_read_u32(&waiting->result_waiters) == 0) return;
    wake_slots(kResultWaiter, hashes, count, all);
}

void wake_waiters(const uint32* hashes, int count, bool all) {
    if (!waiting) return;
    pg_memory_barrier();
    wake_slots(kQueueWaiter, hashes, count, all);
}

}  // namespace wf::pg
