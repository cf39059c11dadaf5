// Wake-ups without NOTIFY: NOTIFY serialises every committing transaction on
// one lock. Instead a transaction that made jobs ready remembers the queues,
// and after its commit sets the latch of the claimers waiting on them.
#include "shared_state.hpp"

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

void on_transaction_end(XactEvent event, void*) {
    if (launcher_wake_noted && (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
                                event == XACT_EVENT_PARALLEL_ABORT)) {
        if (event == XACT_EVENT_COMMIT) wake_launcher();
        launcher_wake_noted = false;
    }
    if (releases_deferred && event != XACT_EVENT_PRE_COMMIT &&
        event != XACT_EVENT_PARALLEL_PRE_COMMIT && event != XACT_EVENT_PRE_PREPARE) {
        // Also after PREPARE: the worker then finds the debt once committed.
        if (event == XACT_EVENT_COMMIT) wake_database_worker_for_releases(MyDatabaseId);
        releases_deferred = false;
    }
    if (noted_count == 0 && !noted_overflow) return;
    if (event == XACT_EVENT_COMMIT) wake_waiters(noted, noted_count, noted_overflow);
    // A prepared transaction forgets them: COMMIT PREPARED wakes nobody,
    // and waiting claimers find its jobs at their next timeout.
    if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
        event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE) {
        noted_count = 0;
        noted_overflow = false;
    }
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
