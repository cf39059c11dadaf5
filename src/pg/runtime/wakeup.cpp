// Wake-ups without NOTIFY: NOTIFY serialises every committing transaction on
// one lock. Instead a transaction that made jobs ready remembers the queues,
// and after its commit sets the latch of the claimers waiting on them.
#include "pg/runtime/wakeup.hpp"
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/worker_registry.hpp"

extern "C" {
#include "common/hashfn.h"
}

namespace wf::pg {

namespace {

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
    if (!shared_memory_ready()) return;  // no waiters to wake: they poll
    uint32 hash = queue_hash(queue, length);
    for (int i = 0; i < noted_count; i++)
        if (noted[i] == hash) return;
    if (noted_count < kMaxNotedQueues)
        noted[noted_count++] = hash;
    else
        noted_overflow = true;
}

}  // namespace wf::pg
