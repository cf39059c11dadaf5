// wf.job by hand (job_table.hpp): a point lookup by id, a tuple lock
// and a heap update, with the executor's index maintenance when the update
// is not HOT.
#include "pg/jobs/job_table.hpp"

#include "pg/citus/shard_route.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace wf::pg {
namespace {

// wf.job's key, looked up by the id alone: a descent of an index led by a
// bigint compares no text (a (queue, id) key compared the queue, by
// collation, at each level, and reached the id past it); the queue is then
// checked in the row. That index is job_pkey from 1.11 (id, queue), job_id
// (id) before (direct_table.hpp). Its other columns are found by name.
constexpr AttrNumber kQueue = 1;

}  // namespace

void JobTable::open(Datum queue_text, const char* function, int writes) {
    queue = queue_text;
    entries.init();
    ShardGroup* group = current_shard_group();
    const char* suffix = group != nullptr ? group->job_suffix.c_str() : "";
    bool before_1_11 = key_leads_with_queue("job_pkey", suffix);
    open_hot_table(function, "job", before_1_11 ? "job_id" : "job_pkey", suffix, writes, kIdQueueKey, 2,
                   before_1_11 ? 1 : 2, &table, &index);
    begin_direct_statement(&snapshot, &command);
    scan = index_beginscan(table, index, snapshot, 1, 0);
    found = table_slot_create(table, nullptr);
    locked = table_slot_create(table, nullptr);
    next = MakeSingleTupleTableSlot(RelationGetDescr(table), &TTSOpsHeapTuple);
}

void JobTable::close() {
    entries.close();
    ExecDropSingleTupleTableSlot(next);
    ExecDropSingleTupleTableSlot(locked);
    ExecDropSingleTupleTableSlot(found);
    index_endscan(scan);
    UnregisterSnapshot(snapshot);
    index_close(index, NoLock);
    table_close(table, NoLock);
}

bool JobTable::find(int64 id) {
    ScanKeyData key;
    ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid, InvalidOid, F_INT8EQ,
                           Int64GetDatum(id));
    index_rescan(scan, &key, 1, nullptr, 0);
    // Ids come from one sequence; the queue, the key's other half, is
    // checked all the same, as job_pkey's descent did.
    while (index_getnext_slot(scan, ForwardScanDirection, found)) {
        bool isnull;
        Datum row_queue = slot_getattr(found, kQueue, &isnull);
        if (!isnull && same_text(row_queue, queue)) return true;
    }
    return false;
}

bool JobTable::lock(int64 id) {
    return find(id) && lock_found();
}

bool JobTable::lock_found(bool skip_held, bool* held) {
    // In READ COMMITTED a row changed since the snapshot is followed to
    // its latest version (EvalPlanQual's way); a transaction snapshot
    // cannot see past it.
    bool follow = !IsolationUsesXactSnapshot();
    TM_FailureData failure;
    TM_Result result = table_tuple_lock(table, &found->tts_tid, snapshot, locked, command,
                                        LockTupleNoKeyExclusive, skip_held ? LockWaitSkip : LockWaitBlock,
                                        follow ? TUPLE_LOCK_FLAG_FIND_LAST_VERSION : 0, &failure);
    switch (result) {
        case TM_Ok:
            return true;
        case TM_SelfModified:  // this call changed it already
            return false;
        case TM_WouldBlock:  // another transaction holds it (skip_held)
            if (held != nullptr) *held = true;
            return false;
        case TM_Updated:
        case TM_Deleted:
            if (IsolationUsesXactSnapshot())
                ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                                errmsg("could not serialize access due to concurrent %s",
                                       result == TM_Updated ? "update" : "delete")));
            return false;  // deleted meanwhile (retention, a cancel's purge)
        default:
            elog(ERROR, "unexpected table_tuple_lock status: %d", static_cast<int>(result));
    }
}

namespace {

// Forms `values`/`nulls` in `row_context` into `next` and writes it as the
// new version of the row at `tid`.
TM_Result write_version(JobTable& jobs, ItemPointer tid, Datum* values, bool* nulls,
                        MemoryContext row_context, bool* update_indexes) {
    MemoryContext outer = MemoryContextSwitchTo(row_context);
    HeapTuple tuple = heap_form_tuple(RelationGetDescr(jobs.table), values, nulls);
    MemoryContextSwitchTo(outer);
    ExecStoreHeapTuple(tuple, jobs.next, true);  // cleared before row_context is reset
    TM_FailureData failure;
    LockTupleMode mode;
    // Waits for a transaction changing the row, as the executor does.
    return table_tuple_update(jobs.table, tid, jobs.next, jobs.command, jobs.snapshot, InvalidSnapshot,
                              /*wait=*/true, &failure, &mode, update_indexes);
}

}  // namespace

void JobTable::update(Datum* values, bool* nulls, MemoryContext row_context) {
    bool update_indexes;
    TM_Result result = write_version(*this, &locked->tts_tid, values, nulls, row_context, &update_indexes);
    // The row is locked by this transaction: nobody else can change it.
    if (result != TM_Ok)
        elog(ERROR, "unexpected table_tuple_update status: %d", static_cast<int>(result));
    if (update_indexes) entries.insert(table, next, /*update=*/true, snapshot, command);
}

JobTable::Write JobTable::update_found(Datum* values, bool* nulls, MemoryContext row_context) {
    bool update_indexes;
    TM_Result result = write_version(*this, &found->tts_tid, values, nulls, row_context, &update_indexes);
    switch (result) {
        case TM_Ok:
            if (update_indexes) entries.insert(table, next, /*update=*/true, snapshot, command);
            return Write::written;
        case TM_SelfModified:
            return Write::gone;
        case TM_Updated:
        case TM_Deleted:
            // lock_found() follows it (READ COMMITTED), or refuses (40001).
            return Write::changed;
        default:
            elog(ERROR, "unexpected table_tuple_update status: %d", static_cast<int>(result));
    }
}

}  // namespace wf::pg
