// Attempts begun by hand (claim_rows.hpp). For each ready row taken: its
// job row is read through job_pkey at the claim's snapshot (only read: the
// ready row, deleted by this claim, is what makes the job this claim's),
// checked against the ready row, and the attempt's claim row inserted
// (claim_table.hpp). The executor's checks are made once per call
// (direct_table.hpp).
#include "pg/jobs/claim_rows.hpp"

#include "pg/base/guard.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/claim_table.hpp"
#include "pg/jobs/direct_table.hpp"
#include "pg/jobs/job_table.hpp"
#include "pg/runtime/ownership.hpp"

extern "C" {
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/timestamp.h"
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
#include "utils/uuid.h"
}

namespace wf::pg {
namespace {

// The columns of wf.job a claim reads, found by name (an updated table has
// its added columns last).
struct ClaimReadColumns {
    AttrNumber payload, workflow_id, step_name, priority, max_attempts, idempotency_key, events,
        depends_on, status, attempt, run_at, start_by, max_run_time, key;

    explicit ClaimReadColumns(Relation t)
        : payload(column_number(t, "payload", JSONBOID)),
          workflow_id(column_number(t, "workflow_id", UUIDOID)),
          step_name(column_number(t, "step_name", TEXTOID)),
          priority(column_number(t, "priority", INT4OID)),
          max_attempts(column_number(t, "max_attempts", INT4OID)),
          idempotency_key(column_number(t, "idempotency_key", TEXTOID)),
          events(column_number(t, "events", JSONBOID)),
          depends_on(column_number(t, "depends_on", INT8ARRAYOID)),
          status(column_number(t, "status", TEXTOID)),
          attempt(column_number(t, "attempt", INT4OID)),
          run_at(column_number(t, "run_at", TIMESTAMPTZOID)),
          start_by(column_number(t, "start_by", TIMESTAMPTZOID)),
          max_run_time(column_number(t, "max_run_time", INTERVALOID)),
          key(column_number(t, "key", TEXTOID)) {}
};

// The results of a job's dependencies as its claim hands them out (what
// claim_reads' jsonb_object_agg built): {step name, or id: result, or
// null}, each dependency read by id through the index JobTable opened, at
// the claim's snapshot; NULL when none is found. Plain C: inside call().
struct InputsReader {
    Relation table, index = nullptr;  // the claim's wf.job and its index by id (JobTable's)
    IndexScanDesc scan = nullptr;     // begun at first use
    MemoryContext scan_context;  // where the scan was opened, for its own allocations
    TupleTableSlot* parent;
    AttrNumber step_name_at, result_at;

    // On the relations `jobs` opened and checked (direct_table.hpp): its
    // index leads with the id, by which the inputs are read.
    void open(const JobTable& jobs) {
        table = jobs.table;
        index = jobs.index;
        step_name_at = column_number(table, "step_name", TEXTOID);
        result_at = column_number(table, "result", JSONBOID);
        scan_context = CurrentMemoryContext;
        scan = index_beginscan(table, index, jobs.snapshot, 1, 0);
        parent = table_slot_create(table, nullptr);
    }

    // The keys and copies in CurrentMemoryContext (which the caller resets
    // job by job), the result in `results`; the scan itself runs in the
    // context it was opened in: a B-tree scan allocates state on the way
    // that must outlive the job (its list of dead entries to mark, when it
    // first meets one), and that state in a reset context was a use after
    // free (a backend crashed in a 10,000-job claim of workflow steps).
    bool read(Datum depends_on, MemoryContext results, Datum* out) {
        MemoryContext scratch = CurrentMemoryContext;
        Datum* ids;
        bool* id_nulls;
        int n;
        deconstruct_array(DatumGetArrayTypeP(depends_on), INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
                          TYPALIGN_DOUBLE, &ids, &id_nulls, &n);
        JsonbParseState* state = nullptr;
        pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);
        int found = 0;
        for (int i = 0; i < n; i++) {
            if (id_nulls[i]) continue;
            ScanKeyData key;
            ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid, InvalidOid, F_INT8EQ, ids[i]);
            MemoryContextSwitchTo(scan_context);
            index_rescan(scan, &key, 1, nullptr, 0);
            while (index_getnext_slot(scan, ForwardScanDirection, parent)) {
                MemoryContextSwitchTo(scratch);
                bool name_null, result_null;
                Datum name = slot_getattr(parent, step_name_at, &name_null);
                Datum result = slot_getattr(parent, result_at, &result_null);
                // Copies: the slot moves on before the object is built.
                JsonbValue k;
                k.type = jbvString;
                if (name_null) {
                    k.val.string.val = psprintf(INT64_FORMAT, DatumGetInt64(ids[i]));
                    k.val.string.len = static_cast<int>(strlen(k.val.string.val));
                } else {
                    text* t = DatumGetTextPCopy(name);
                    k.val.string.val = VARDATA(t);
                    k.val.string.len = static_cast<int>(VARSIZE(t) - VARHDRSZ);
                }
                pushJsonbValue(&state, WJB_KEY, &k);
                JsonbValue v;
                if (result_null) {
                    v.type = jbvNull;
                } else {
                    Jsonb* r = DatumGetJsonbPCopy(result);
                    v.type = jbvBinary;
                    v.val.binary.data = &r->root;
                    v.val.binary.len = static_cast<int>(VARSIZE(r) - VARHDRSZ);
                }
                pushJsonbValue(&state, WJB_VALUE, &v);
                found++;
                MemoryContextSwitchTo(scan_context);
            }
            MemoryContextSwitchTo(scratch);
        }
        JsonbValue* object = pushJsonbValue(&state, WJB_END_OBJECT, nullptr);
        if (found == 0) return false;
        MemoryContext outer = MemoryContextSwitchTo(results);
        *out = JsonbPGetDatum(JsonbValueToJsonb(object));
        MemoryContextSwitchTo(outer);
        return true;
    }

    void close() {  // the relations stay JobTable's to close
        if (scan == nullptr) return;
        ExecDropSingleTupleTableSlot(parent);
        index_endscan(scan);
    }
};

Datum plus(Datum at, const Interval* interval) {
    return DirectFunctionCall2(timestamptz_pl_interval, at, PointerGetDatum(interval));
}

}  // namespace

std::vector<ClaimedJob> start_attempts(Datum queue, const ClaimOwner& owner, TimestampTz now,
                                       const std::vector<ReadyRow>& ready) {
    std::vector<ClaimedJob> jobs(ready.size());
    const ReadyRow* rows = ready.data();
    ClaimedJob* claimed = jobs.data();
    size_t count = ready.size();
    const Interval* lease = owner.lease ? &*owner.lease : nullptr;
    const Interval* queue_max_run_time = owner.max_run_time ? &*owner.max_run_time : nullptr;
    int64 owner_session = session_owner_key();
    size_t n = call([&] {
        MemoryContext results = CurrentMemoryContext;
        JobTable jobs_table;
        ClaimTable claims;
        jobs_table.open(queue, "wf_claim", kReadOnly);
        claims.open(queue, "wf_claim", kInsert | kDelete);
        const ClaimReadColumns at(jobs_table.table);
        TupleTableSlot* job = jobs_table.found;
        Datum now_datum = TimestampTzGetDatum(now);
        // The claim row's values, freed job by job.
        MemoryContext per_job = AllocSetContextCreate(CurrentMemoryContext, "pg_wf claim",
                                                      ALLOCSET_DEFAULT_SIZES);
        size_t started = 0;
        InputsReader inputs;
        const bool by_hand_inputs = current_shard_group() == nullptr;
        for (size_t i = 0; i < count; i++) {
            MemoryContextReset(per_job);
            const ReadyRow& r = rows[i];
            if (!jobs_table.find(r.id)) continue;
            bool isnull, start_by_null;
            // A ready row's key is its job's own priority and run_at; a row
            // that does not match (none should) is used up.
            if (DatumGetInt32(slot_getattr(job, at.priority, &isnull)) != r.priority ||
                DatumGetTimestampTz(slot_getattr(job, at.run_at, &isnull)) != r.run_at)
                continue;
            Datum status = slot_getattr(job, at.status, &isnull);
            if (isnull || !text_is(status, "pending")) continue;
            int32 last_attempt = DatumGetInt32(slot_getattr(job, at.attempt, &isnull));
            Datum start_by = slot_getattr(job, at.start_by, &start_by_null);
            // A job past its start-by time does not start: the worker fails it.
            if (!start_by_null && last_attempt == 0 && DatumGetTimestampTz(start_by) < now) continue;

            NewClaim c{};
            c.id = r.id;
            c.attempt = last_attempt + 1;
            c.owner_session = owner_session;
            c.owner_pid = MyProcPid;
            c.worker = owner.worker;
            c.lease = lease;
            c.started_at = now_datum;
            c.key = slot_getattr(job, at.key, &c.key_null);
            // Its max run time (the job's, else the queue's) ends its lease.
            bool own_max_null;
            Datum own_max = slot_getattr(job, at.max_run_time, &own_max_null);
            const Interval* max_run_time =
                own_max_null ? queue_max_run_time : DatumGetIntervalP(own_max);
            c.run_deadline_null = max_run_time == nullptr;
            if (!c.run_deadline_null) c.run_deadline = plus(now_datum, max_run_time);
            // least(now + lease, run_deadline), as least() skips NULLs.
            c.lease_expires_at_null = lease == nullptr && c.run_deadline_null;
            if (lease != nullptr) {
                c.lease_expires_at = plus(now_datum, lease);
                if (!c.run_deadline_null &&
                    DatumGetTimestampTz(c.run_deadline) < DatumGetTimestampTz(c.lease_expires_at))
                    c.lease_expires_at = c.run_deadline;
            } else if (!c.run_deadline_null) {
                c.lease_expires_at = c.run_deadline;
            }
            if (!claims.begin(c, per_job)) continue;

            // The job as wf_claim hands it out, copied out of the slot.
            ClaimedJob& out = claimed[started++];
            MemoryContext outer = MemoryContextSwitchTo(results);
            auto copy = [&](int column, AttrNumber from, bool by_value, int length) {
                Datum value = slot_getattr(job, from, &out.nulls[column]);
                out.values[column] = out.nulls[column] ? 0 : datumCopy(value, by_value, length);
            };
            out.id = r.id;
            out.priority = r.priority;
            out.run_at = r.run_at;
            out.values[kClaimId] = Int64GetDatum(r.id);
            out.nulls[kClaimId] = false;
            out.values[kClaimAttempt] = Int32GetDatum(c.attempt);
            out.nulls[kClaimAttempt] = false;
            out.values[kClaimQueue] = queue;
            out.nulls[kClaimQueue] = false;
            copy(kClaimPayload, at.payload, false, -1);
            copy(kClaimWorkflowId, at.workflow_id, false, UUID_LEN);
            copy(kClaimStepName, at.step_name, false, -1);
            out.values[kClaimPriority] = Int32GetDatum(r.priority);
            out.nulls[kClaimPriority] = false;
            copy(kClaimMaxAttempts, at.max_attempts, true, sizeof(int32));
            copy(kClaimIdempotencyKey, at.idempotency_key, false, -1);
            out.nulls[kClaimInputs] = true;
            out.values[kClaimLeaseExpiresAt] = c.lease_expires_at;
            out.nulls[kClaimLeaseExpiresAt] = c.lease_expires_at_null;
            out.nulls[kClaimCheckpoints] = true;
            copy(kClaimEvents, at.events, false, -1);
            MemoryContextSwitchTo(outer);
            out.reads_inputs = !slot_attisnull(job, at.depends_on);
            // Inputs read here, unless dependencies may be in other shard
            // groups (then claim_reads_in_group reads what they delivered).
            if (out.reads_inputs && by_hand_inputs) {
                if (inputs.scan == nullptr) inputs.open(jobs_table);
                bool isnull;
                MemoryContext outer_context = MemoryContextSwitchTo(per_job);
                out.nulls[kClaimInputs] =
                    !inputs.read(slot_getattr(job, at.depends_on, &isnull), results, &out.values[kClaimInputs]);
                MemoryContextSwitchTo(outer_context);
                out.reads_inputs = false;
            }
            out.reads_checkpoints = c.attempt > 1;
        }
        MemoryContextDelete(per_job);
        inputs.close();
        claims.close();
        jobs_table.close();
        return started;
    });
    jobs.resize(n);
    return jobs;
}

}  // namespace wf::pg
