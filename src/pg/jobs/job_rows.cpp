// Running attempts completed by hand (job_rows.hpp). For each attempt: its
// claim is read (claim_table.hpp); its job row is found through job_pkey,
// locked as UPDATE locks it, checked (still that attempt, still running),
// and a new version written with the executor's index maintenance when the
// update is not HOT; then the claim is deleted. The executor's checks are
// made once per call (direct_table.hpp).
#include "pg/jobs/job_rows.hpp"

#include "pg/base/guard.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/claim_table.hpp"
#include "pg/jobs/direct_table.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"
}

namespace wf::pg {
namespace {

// wf.job's key (sql/pg_wf.sql); its other columns are found by name.
constexpr AttrNumber kQueue = 1, kId = 2;
const ExpectedColumn kJobKey[] = {{kQueue, "queue", TEXTOID}, {kId, "id", INT8OID}};

// wf.job, open for one call. Plain C: every member runs inside call().
struct JobTable {
    Relation table;
    Relation index;  // job_pkey
    Snapshot snapshot;
    CommandId command;
    IndexScanDesc scan;      // of job_pkey, rescanned for each job
    TupleTableSlot* found;   // the row as the snapshot sees it
    TupleTableSlot* locked;  // its latest version, locked
    TupleTableSlot* next;    // the version written
    Datum queue;
    AttrNumber status_at, attempt_at, started_at_at, finished_at_at, worker_at, last_error_at,
        result_at, progress_at, cancel_requested_at, has_dependents_at, workflow_id_at, child_of_at;
    // For index entries of an update that is not HOT, made at the first.
    EState* estate = nullptr;
    ResultRelInfo* result_relation = nullptr;

    void open(Datum queue_text, const char* function) {
        queue = queue_text;
        ShardGroup* group = current_shard_group();
        open_hot_table(function, "job", "job_pkey", group != nullptr ? group->job_suffix.c_str() : "",
                       CMD_UPDATE, kJobKey, lengthof(kJobKey), 2, &table, &index);
        status_at = column_number(table, "status", TEXTOID);
        attempt_at = column_number(table, "attempt", INT4OID);
        started_at_at = column_number(table, "started_at", TIMESTAMPTZOID);
        finished_at_at = column_number(table, "finished_at", TIMESTAMPTZOID);
        worker_at = column_number(table, "worker", TEXTOID);
        last_error_at = column_number(table, "last_error", TEXTOID);
        result_at = column_number(table, "result", JSONBOID);
        progress_at = column_number(table, "progress", JSONBOID);
        cancel_requested_at = column_number(table, "cancel_requested", BOOLOID);
        has_dependents_at = column_number(table, "has_dependents", BOOLOID);
        workflow_id_at = column_number(table, "workflow_id", UUIDOID);
        child_of_at = column_number(table, "child_of", INT8OID);
        begin_direct_statement(&snapshot, &command);
        scan = index_beginscan(table, index, snapshot, 2, 0);
        found = table_slot_create(table, nullptr);
        locked = table_slot_create(table, nullptr);
        next = MakeSingleTupleTableSlot(RelationGetDescr(table), &TTSOpsHeapTuple);
    }

    void close() {
        if (estate != nullptr) {
            ExecCloseIndices(result_relation);
            FreeExecutorState(estate);
        }
        ExecDropSingleTupleTableSlot(next);
        ExecDropSingleTupleTableSlot(locked);
        ExecDropSingleTupleTableSlot(found);
        index_endscan(scan);
        UnregisterSnapshot(snapshot);
        index_close(index, NoLock);
        table_close(table, NoLock);
    }

    // Job `id` locked as an UPDATE locks it, its latest version in `locked`;
    // false if there is none (gone, or already changed by this call).
    bool lock(int64 id) {
        ScanKeyData keys[2];
        queue_id_keys(index, queue, id, keys);
        index_rescan(scan, keys, 2, nullptr, 0);
        if (!index_getnext_slot(scan, ForwardScanDirection, found)) return false;
        // In READ COMMITTED a row changed since the snapshot is followed to
        // its latest version (EvalPlanQual's way); a transaction snapshot
        // cannot see past it.
        bool follow = !IsolationUsesXactSnapshot();
        TM_FailureData failure;
        TM_Result result = table_tuple_lock(table, &found->tts_tid, snapshot, locked, command,
                                            LockTupleNoKeyExclusive, LockWaitBlock,
                                            follow ? TUPLE_LOCK_FLAG_FIND_LAST_VERSION : 0, &failure);
        switch (result) {
            case TM_Ok:
                return true;
            case TM_SelfModified:  // this call changed it already
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

    // Writes `values`/`nulls` as the locked row's new version (formed in
    // `row_context`), with its index entries when the update is not HOT.
    void update(Datum* values, bool* nulls, MemoryContext row_context) {
        MemoryContext outer = MemoryContextSwitchTo(row_context);
        HeapTuple tuple = heap_form_tuple(RelationGetDescr(table), values, nulls);
        MemoryContextSwitchTo(outer);
        ExecStoreHeapTuple(tuple, next, true);  // cleared before row_context is reset
        TM_FailureData failure;
        LockTupleMode mode;
        bool update_indexes;
        TM_Result result = table_tuple_update(table, &locked->tts_tid, next, command, snapshot,
                                              InvalidSnapshot, /*wait=*/true, &failure, &mode,
                                              &update_indexes);
        // The row is locked by this transaction: nobody else can change it.
        if (result != TM_Ok)
            elog(ERROR, "unexpected table_tuple_update status: %d", static_cast<int>(result));
        if (!update_indexes) return;
        if (estate == nullptr) {
            estate = CreateExecutorState();
            RangeTblEntry* rte = makeNode(RangeTblEntry);
            rte->rtekind = RTE_RELATION;
            rte->relid = RelationGetRelid(table);
            rte->relkind = table->rd_rel->relkind;
            rte->rellockmode = RowExclusiveLock;
            ExecInitRangeTable(estate, list_make1(rte));
            estate->es_snapshot = snapshot;
            estate->es_output_cid = command;
            result_relation = makeNode(ResultRelInfo);
            InitResultRelInfo(result_relation, table, 1, nullptr, 0);
            ExecOpenIndices(result_relation, false);
        }
        if (result_relation->ri_NumIndices > 0) {
            List* recheck = ExecInsertIndexTuples(result_relation, next, estate, /*update=*/true,
                                                  /*noDupErr=*/false, nullptr, NIL);
            list_free(recheck);
        }
        ResetPerTupleExprContext(estate);
    }
};

bool text_is(Datum value, const char* expected) {
    text* t = DatumGetTextPP(value);
    size_t length = strlen(expected);
    return VARSIZE_ANY_EXHDR(t) == length && memcmp(VARDATA_ANY(t), expected, length) == 0;
}

}  // namespace

size_t complete_running_attempts(const char* function, Datum queue,
                                 const std::vector<AttemptToComplete>& items,
                                 std::vector<CompletedJob>* out) {
    out->resize(items.size());
    const AttemptToComplete* item = items.data();
    CompletedJob* completed = out->data();
    size_t count = items.size();
    size_t n = call([&] {
        ClaimTable claims;
        JobTable jobs;
        claims.open(queue, function);
        jobs.open(queue, function);
        TupleDesc desc = RelationGetDescr(jobs.table);
        Datum* values = static_cast<Datum*>(palloc(desc->natts * sizeof(Datum)));
        bool* nulls = static_cast<bool*>(palloc(desc->natts * sizeof(bool)));
        Datum now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
        Datum done = CStringGetTextDatum("done");
        Datum cancelled = CStringGetTextDatum("cancelled");
        Datum cancelled_error = CStringGetTextDatum("cancelled while running");
        // What one job's completion keeps (the claim's copied values, the
        // new row) is freed before the next: a batch of 100,000 holds one
        // job's worth. Only those go there: an index scan allocates state
        // during a lookup that must outlive it.
        MemoryContext per_job = AllocSetContextCreate(CurrentMemoryContext, "pg_wf completion",
                                                      ALLOCSET_DEFAULT_SIZES);
        size_t ended = 0;
        for (size_t i = 0; i < count; i++) {
            ExecClearTuple(jobs.next);  // its tuple lives in per_job
            MemoryContextReset(per_job);
            const AttemptToComplete& a = item[i];
            ClaimRead claim;
            // The claim first (as the statement read it), then the job row:
            // the row's lock is what serialises this with a cancel or the
            // reaper, which take the job row before the claim.
            if (!claims.read(a.id, &claim, per_job) || claim.attempt != a.attempt) continue;
            if (!jobs.lock(a.id)) continue;
            slot_getallattrs(jobs.locked);
            memcpy(values, jobs.locked->tts_values, desc->natts * sizeof(Datum));
            memcpy(nulls, jobs.locked->tts_isnull, desc->natts * sizeof(bool));
            // Still this attempt, still running (WF_SQL_ROW_RUNS).
            int i_status = jobs.status_at - 1, i_attempt = jobs.attempt_at - 1;
            if (nulls[i_status] || nulls[i_attempt] ||
                DatumGetInt32(values[i_attempt]) + 1 != a.attempt || !text_is(values[i_status], "pending"))
                continue;
            bool cancel = !nulls[jobs.cancel_requested_at - 1] &&
                          DatumGetBool(values[jobs.cancel_requested_at - 1]);
            values[i_status] = cancel ? cancelled : done;
            if (!cancel) {
                values[jobs.result_at - 1] = a.result;
                nulls[jobs.result_at - 1] = a.result_null;
            } else {
                values[jobs.last_error_at - 1] = cancelled_error;
                nulls[jobs.last_error_at - 1] = false;
            }
            values[jobs.finished_at_at - 1] = now;
            nulls[jobs.finished_at_at - 1] = false;
            values[i_attempt] = Int32GetDatum(claim.attempt);
            values[jobs.started_at_at - 1] = claim.started_at;
            nulls[jobs.started_at_at - 1] = claim.started_at_null;
            values[jobs.worker_at - 1] = claim.worker;
            nulls[jobs.worker_at - 1] = claim.worker_null;
            if (!claim.progress_null) {  // coalesce(claim's, the row's)
                values[jobs.progress_at - 1] = claim.progress;
                nulls[jobs.progress_at - 1] = false;
            }
            CompletedJob& c = completed[ended++];
            c.id = a.id;
            c.done = !cancel;
            c.has_dependents = !nulls[jobs.has_dependents_at - 1] &&
                               DatumGetBool(values[jobs.has_dependents_at - 1]);
            c.in_workflow = !nulls[jobs.workflow_id_at - 1];
            if (c.in_workflow)
                memcpy(&c.workflow_id, DatumGetUUIDP(values[jobs.workflow_id_at - 1]), sizeof c.workflow_id);
            c.has_child_of = !nulls[jobs.child_of_at - 1];
            jobs.update(values, nulls, per_job);
            claims.end_read(a.id);
        }
        ExecClearTuple(jobs.next);
        MemoryContextDelete(per_job);
        jobs.close();
        claims.close();
        return ended;
    });
    out->resize(n);
    return n;
}

}  // namespace wf::pg
