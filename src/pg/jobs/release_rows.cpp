// Blocked children released by hand (release_rows.hpp): the edges of the
// finished parents read through wf.dependency's key, each child found and
// locked through job_pkey (never queueing on its lock), updated in place
// (HOT when its page has room), and its ready row inserted when it has no
// unfinished dependency left.
#include "pg/jobs/release_rows.hpp"

#include "pg/base/guard.hpp"
#include "pg/jobs/direct_table.hpp"
#include "pg/jobs/job_inserts.hpp"
#include "pg/jobs/job_table.hpp"
#include "pg/jobs/key_order.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

namespace wf::pg {

int release_wait_ms = 10;

namespace {


struct Edge {
    int64 child_id;
    Datum child_queue;  // text
};

int by_child(const void* a, const void* b) {
    int64 x = static_cast<const Edge*>(a)->child_id, y = static_cast<const Edge*>(b)->child_id;
    return x < y ? -1 : x > y ? 1 : 0;
}

// The columns of wf.job a release reads or writes, found by name.
struct ReleaseColumns {
    AttrNumber status, pending_deps, run_at, priority, key, version;
    explicit ReleaseColumns(Relation t)
        : status(column_number(t, "status", TEXTOID)),
          pending_deps(column_number(t, "pending_deps", INT4OID)),
          run_at(column_number(t, "run_at", TIMESTAMPTZOID)),
          priority(column_number(t, "priority", INT4OID)),
          key(column_number(t, "key", TEXTOID)),
          version(column_number(t, "version", TEXTOID)) {}
};

// A wait for a child's holder polls this often.
constexpr long kHolderPollUs = 200;

enum class ChildLock { taken, gone, held };

// Locks the child found in `jobs` (its latest version), or tells why not.
// A child another transaction holds is waited for only when `may_wait`:
// the holder is then almost surely the completion of its one other
// unfinished parent, whose commit comes within a flush, and waiting makes
// the child ready in this transaction; a debt instead costs a statement
// here and a pass of the worker (a fifth of the CPU per step, measured on
// a wide graph whose steps end side by side).
// The wait polls, so this transaction never queues on the lock while it
// holds rows of its own: it cannot close a deadlock with a transaction
// that locks in another order (a cancel locking a workflow's steps, two
// completions in one transaction); such a transaction, queued on a row
// this one holds, waits out the poll. All waits of one call end together
// at `*give_up`, wf.release_wait after the first began: a batch meeting
// many held children (two batches crossing) is held up once, not per child.
ChildLock lock_child(JobTable& jobs, bool may_wait, TimestampTz* give_up) {
    bool held = false;
    if (jobs.lock_found(/*skip_held=*/true, &held)) return ChildLock::taken;
    if (!held) return ChildLock::gone;
    if (!may_wait || release_wait_ms <= 0) return ChildLock::held;
    if (*give_up == 0) *give_up = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), release_wait_ms);
    while (GetCurrentTimestamp() < *give_up) {
        pgstat_report_wait_start(PG_WAIT_EXTENSION);
        pg_usleep(kHolderPollUs);
        pgstat_report_wait_end();
        CHECK_FOR_INTERRUPTS();
        held = false;
        if (jobs.lock_found(/*skip_held=*/true, &held)) return ChildLock::taken;
        if (!held) return ChildLock::gone;
    }
    return ChildLock::held;
}

// What the call hands back, in the caller's memory context.
struct ReleaseOut {
    int64* locked;
    int nlocked;
    text** ready_queues;
    int nready;
    bool skipped;
};

// The edges from `parents` to their children, sorted by child.
Edge* read_edges(const int64* parents, size_t nparents, Snapshot snapshot, int* count) {
    Relation table, index;
    open_hot_table("wf_complete", "dependency", "dependency_pkey", "", kReadOnly, kDependencyColumns,
                   lengthof(kDependencyColumns), 1, &table, &index);
    IndexScanDesc scan = index_beginscan(table, index, snapshot, 1, 0);
    TupleTableSlot* slot = table_slot_create(table, nullptr);
    int capacity = 16, n = 0;
    Edge* edges = static_cast<Edge*>(palloc(capacity * sizeof(Edge)));
    for (size_t p = 0; p < nparents; p++) {
        ScanKeyData key;
        ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid, InvalidOid, F_INT8EQ,
                               Int64GetDatum(parents[p]));
        index_rescan(scan, &key, 1, nullptr, 0);
        while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
            if (n == capacity) {
                capacity *= 2;
                edges = static_cast<Edge*>(repalloc(edges, capacity * sizeof(Edge)));
            }
            bool isnull;
            edges[n].child_id = DatumGetInt64(slot_getattr(slot, kDependencyChildId, &isnull));
            edges[n].child_queue = datumCopy(slot_getattr(slot, kDependencyChildQueue, &isnull), false, -1);
            n++;
        }
    }
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
    index_close(index, NoLock);
    table_close(table, NoLock);
    qsort(edges, n, sizeof(Edge), by_child);
    *count = n;
    return edges;
}

}  // namespace

Released release_children_by_hand(const std::vector<int64>& parents) {
    const int64* parent_ids = parents.data();
    size_t nparents = parents.size();
    ReleaseOut out = call([&] {
        ReleaseOut r{};
        JobTable jobs;
        jobs.open(0, "wf_complete", kUpdate);  // its queue is set child by child
        int nedges = 0;
        Edge* edges = read_edges(parent_ids, nparents, jobs.snapshot, &nedges);
        const ReleaseColumns at(jobs.table);
        ReadyInserts ready;
        ready.open("wf_complete");
        // A released child's new row and ready row, freed once written.
        MemoryContext rows = AllocSetContextCreate(CurrentMemoryContext, "pg_wf release", ALLOCSET_DEFAULT_SIZES);
        int natts = RelationGetDescr(jobs.table)->natts;
        Datum* values = static_cast<Datum*>(palloc(natts * sizeof(Datum)));
        bool* nulls = static_cast<bool*>(palloc(natts * sizeof(bool)));
        r.locked = static_cast<int64*>(palloc((nedges + 1) * sizeof(int64)));
        r.ready_queues = static_cast<text**>(palloc((nedges + 1) * sizeof(text*)));
        TimestampTz now = GetCurrentTransactionStartTimestamp();
        TimestampTz give_up = 0;  // the end of this call's waits (lock_child)
        for (int i = 0; i < nedges;) {
            // One release per finished parent of this child.
            const Edge& edge = edges[i];
            int finished = 0;
            for (; i < nedges && edges[i].child_id == edge.child_id; i++) finished++;
            jobs.queue = edge.child_queue;
            bool isnull;
            if (!jobs.find(edge.child_id) || !text_is(slot_getattr(jobs.found, at.status, &isnull), "blocked"))
                continue;
            // Only these parents and at most one more still block it, in
            // the version this snapshot sees: worth waiting for
            // (lock_child). Not under a transaction snapshot, which could
            // not take the version the holder commits (40001): a debt then.
            bool last_but_one = DatumGetInt32(slot_getattr(jobs.found, at.pending_deps, &isnull)) - finished <= 1;
            ChildLock lock = lock_child(jobs, last_but_one && !IsolationUsesXactSnapshot(), &give_up);
            if (lock != ChildLock::taken) {
                r.skipped = r.skipped || lock == ChildLock::held;
                continue;
            }
            // Its latest version, locked: still blocked?
            Datum status = slot_getattr(jobs.locked, at.status, &isnull);
            if (isnull || !text_is(status, "blocked")) continue;
            r.locked[r.nlocked++] = edge.child_id;
            slot_getallattrs(jobs.locked);
            memcpy(values, jobs.locked->tts_values, natts * sizeof(Datum));
            memcpy(nulls, jobs.locked->tts_isnull, natts * sizeof(bool));
            int32 pending = DatumGetInt32(values[at.pending_deps - 1]);
            values[at.pending_deps - 1] = Int32GetDatum(pending - finished);
            bool now_ready = pending == finished;
            MemoryContext outer = MemoryContextSwitchTo(rows);
            if (now_ready) {
                values[at.status - 1] = CStringGetTextDatum("pending");
                // It may run at its own run_at, never before now.
                if (DatumGetTimestampTz(values[at.run_at - 1]) < now)
                    values[at.run_at - 1] = TimestampTzGetDatum(now);
                // Its ready row's values outlive the locked slot.
                if (!nulls[at.key - 1]) values[at.key - 1] = datumCopy(values[at.key - 1], false, -1);
                if (!nulls[at.version - 1])
                    values[at.version - 1] = datumCopy(values[at.version - 1], false, -1);
            }
            MemoryContextSwitchTo(outer);
            jobs.update(values, nulls, rows);
            ExecClearTuple(jobs.next);
            if (!now_ready) continue;
            // Out of the key order when this backend knows the queue claims
            // plainly (key_order.hpp).
            text* queue = DatumGetTextPP(edge.child_queue);
            bool plain = cached_claims_plainly(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
            ready.add(edge.child_queue, DatumGetInt32(values[at.priority - 1]), values[at.run_at - 1],
                      edge.child_id, values[at.key - 1], nulls[at.key - 1], values[at.version - 1],
                      nulls[at.version - 1], /*key_order=*/!plain);
            r.ready_queues[r.nready++] = queue;
            if (ready.full()) {
                ready.flush(jobs.snapshot, jobs.command);
                MemoryContextReset(rows);
            }
        }
        ready.flush(jobs.snapshot, jobs.command);
        ready.close();
        MemoryContextDelete(rows);
        jobs.close();
        return r;
    });
    Released released;
    released.locked.assign(out.locked, out.locked + out.nlocked);
    for (int i = 0; i < out.nready; i++)
        released.ready_queues.emplace_back(VARDATA_ANY(out.ready_queues[i]), VARSIZE_ANY_EXHDR(out.ready_queues[i]));
    released.skipped = out.skipped;
    return released;
}

}  // namespace wf::pg
