// Wake-ups without NOTIFY: NOTIFY serialises every committing transaction on
// one lock. Instead a transaction that made jobs ready remembers the queues,
// and after its commit sets the latch of the claimers waiting on them.
#include "pg/runtime/wakeup.hpp"
#include "pg/runtime/worker_registry.hpp"

extern "C" {
#include "access/twophase.h"
#include "common/hashfn.h"
}

namespace wf::pg {

namespace {

// One slot per process, indexed by pgprocno: a claimer waiting
// on a queue, seen by the transactions that commit jobs there.
struct WaiterSlot {
    pg_atomic_uint32 active;
    Oid database;
    uint32 queue_hash;
};

struct WaiterSlots {
    int count;
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
bool releases_deferred = false;
bool launcher_wake_noted = false;

// After commit: wakes the claimers of the noted queues, the worker for the
// deferred releases, the launcher after CREATE EXTENSION. Whatever the end,
// the notes are forgotten: a prepared transaction's too, so COMMIT PREPARED
// wakes nobody (waiting claimers find its jobs at their next timeout, the
// worker its debts at its next pass).
void on_transaction_end(XactEvent event, void*) {
    bool noted_any = noted_count > 0 || noted_overflow || releases_deferred || launcher_wake_noted;
    if (!noted_any) return;
    bool committed = event == XACT_EVENT_COMMIT;
    if (!committed && event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT &&
        event != XACT_EVENT_PREPARE)
        return;
    if (committed) {
        if (noted_count > 0 || noted_overflow) wake_waiters(noted, noted_count, noted_overflow);
        if (releases_deferred) wake_database_worker_for_releases(MyDatabaseId);
        if (launcher_wake_noted) wake_launcher();
    }
    noted_count = 0;
    noted_overflow = false;
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
    for (int i = 0; i < waiting->count; i++) pg_atomic_init_u32(&slots()[i].active, 0);
}

void begin_waiting(uint32 hash) {
    WaiterSlot* slot = my_slot();
    if (!slot) return;
    slot->database = MyDatabaseId;
    slot->queue_hash = hash;
    pg_write_barrier();
    pg_atomic_write_u32(&slot->active, 1);
    // The claim that follows must see every commit that did not see this slot.
    pg_memory_barrier();
}

void end_waiting() {
    if (WaiterSlot* slot = my_slot()) pg_atomic_write_u32(&slot->active, 0);
}

void wake_waiters(const uint32* hashes, int count, bool all) {
    if (!waiting) return;
    pg_memory_barrier();
    WaiterSlot* waiters = slots();
    for (int i = 0; i < waiting->count; i++) {
        if (pg_atomic_read_u32(&waiters[i].active) == 0) continue;
        pg_read_barrier();
        if (waiters[i].database != MyDatabaseId) continue;
        bool match = all;
        for (int h = 0; !match && h < count; h++) match = waiters[i].queue_hash == hashes[h];
        if (match) SetLatch(&ProcGlobal->allProcs[i].procLatch);
    }
}

}  // namespace wf::pg
