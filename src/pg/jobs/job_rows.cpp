// Running attempts completed by hand (job_rows.hpp). For each attempt: its
// claim is read (claim_table.hpp); its job row is found through job_pkey,
// checked (still that attempt, still running), and a new version written
// as UPDATE writes it (a row changed meanwhile is locked and checked
// again), with the executor's index maintenance when the update is not
// HOT; then the claim is deleted. The executor's checks are
// made once per call (direct_table.hpp).
#include "pg/jobs/job_rows.hpp"

#include "pg/base/guard.hpp"
#include "pg/jobs/claim_table.hpp"
#include "pg/jobs/direct_table.hpp"
#include "pg/jobs/job_table.hpp"

extern "C" {
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/uuid.h"
}

namespace wf::pg {
namespace {

// The columns of wf.job a completion reads or writes, found by name (an
// updated table has its added columns last).
struct CompletionColumns {
    AttrNumber status, attempt, started_at, finished_at, worker, last_error, result, progress,
        cancel_requested, has_dependents, workflow_id, child_of;

    explicit CompletionColumns(Relation t)
        : status(column_number(t, "status", TEXTOID)),
          attempt(column_number(t, "attempt", INT4OID)),
          started_at(column_number(t, "started_at", TIMESTAMPTZOID)),
          finished_at(column_number(t, "finished_at", TIMESTAMPTZOID)),
          worker(column_number(t, "worker", TEXTOID)),
          last_error(column_number(t, "last_error", TEXTOID)),
          result(column_number(t, "result", JSONBOID)),
          progress(column_number(t, "progress", JSONBOID)),
          cancel_requested(column_number(t, "cancel_requested", BOOLOID)),
          has_dependents(column_number(t, "has_dependents", BOOLOID)),
          workflow_id(column_number(t, "workflow_id", UUIDOID)),
          child_of(column_number(t, "child_of", INT8OID)) {}
};

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
        claims.open(queue, function, kDelete);
        jobs.open(queue, function, kUpdate);
        const CompletionColumns at(jobs.table);
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
            if (!jobs.find(a.id)) continue;
            // The row as the snapshot saw it is written unless another
            // transaction changed it since; then its latest version, locked,
            // is checked again (EvalPlanQual's way).
            TupleTableSlot* row = jobs.found;
            bool written = false;
            for (;;) {
                slot_getallattrs(row);
                memcpy(values, row->tts_values, desc->natts * sizeof(Datum));
                memcpy(nulls, row->tts_isnull, desc->natts * sizeof(bool));
                // Still this attempt, still running (WF_SQL_ROW_RUNS).
                int i_status = at.status - 1, i_attempt = at.attempt - 1;
                if (nulls[i_status] || nulls[i_attempt] ||
                    DatumGetInt32(values[i_attempt]) + 1 != a.attempt || !text_is(values[i_status], "pending"))
                    break;
                bool cancel = !nulls[at.cancel_requested - 1] &&
                              DatumGetBool(values[at.cancel_requested - 1]);
                values[i_status] = cancel ? cancelled : done;
                if (!cancel) {
                    values[at.result - 1] = a.result;
                    nulls[at.result - 1] = a.result_null;
                } else {
                    values[at.last_error - 1] = cancelled_error;
                    nulls[at.last_error - 1] = false;
                }
                values[at.finished_at - 1] = now;
                nulls[at.finished_at - 1] = false;
                values[i_attempt] = Int32GetDatum(claim.attempt);
                values[at.started_at - 1] = claim.started_at;
                nulls[at.started_at - 1] = claim.started_at_null;
                values[at.worker - 1] = claim.worker;
                nulls[at.worker - 1] = claim.worker_null;
                if (!claim.progress_null) {  // coalesce(claim's, the row's)
                    values[at.progress - 1] = claim.progress;
                    nulls[at.progress - 1] = false;
                }
                if (row == jobs.locked) {
                    jobs.update(values, nulls, per_job);
                    written = true;
                    break;
                }
                JobTable::Write write = jobs.update_found(values, nulls, per_job);
                if (write == JobTable::Write::written) {
                    written = true;
                    break;
                }
                if (write != JobTable::Write::changed || !jobs.lock_found()) break;
                row = jobs.locked;
            }
            if (!written) continue;
            CompletedJob& c = completed[ended++];
            c.id = a.id;
            c.done = text_is(values[at.status - 1], "done");
            c.has_dependents = !nulls[at.has_dependents - 1] &&
                               DatumGetBool(values[at.has_dependents - 1]);
            c.in_workflow = !nulls[at.workflow_id - 1];
            if (c.in_workflow)
                memcpy(&c.workflow_id, DatumGetUUIDP(values[at.workflow_id - 1]), sizeof c.workflow_id);
            c.has_child_of = !nulls[at.child_of - 1];
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
