// New jobs by hand (job_inserts.hpp): ids from wf.job_id_seq, rows formed
// whole, written a batch at a time by the table's multi-insert (as COPY
// does), each row's index entries by the executor's ExecInsertIndexTuples.
#include "pg/jobs/job_inserts.hpp"

#include <cstring>

#include "pg/citus/shard_route.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/runtime/worker_registry.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/tuptable.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace wf::pg {
namespace {

// wf.job's key, job_pkey, is (id, queue) or, before 1.11, (queue, id)
// (direct_table.hpp); its other columns are found by name.
constexpr AttrNumber kJobQueue = 1, kJobId = 2;
// Every column of wf.job (in any order: updates add columns last). Those
// an enqueue leaves NULL are named too: a column not here would get no
// default.
const char* const kJobColumnNames[] = {
    "queue",       "id",           "priority",    "created_at",      "workflow_id",  "max_attempts",
    "attempt_budget", "status",    "attempt",     "run_at",          "started_at",   "finished_at",
    "pending_deps", "has_dependents", "cancel_requested", "cancelled_by", "worker",    "last_error",
    "result",      "step_name",    "idempotency_key", "depends_on",  "payload",      "events",
    "key",         "dedup_key",    "max_run_time", "start_by",       "version",      "child_of",
    "progress"};

// wf.ready's columns, all of them, in place (ready_set.cpp checks the same).
constexpr AttrNumber kReadyQueue = 1, kReadyPriority = 2, kReadyRunAt = 3, kReadyId = 4, kReadyKey = 5,
                     kReadyVersion = 6;
const ExpectedColumn kReadyColumns[] = {{kReadyQueue, "queue", TEXTOID},
                                        {kReadyPriority, "priority", INT4OID},
                                        {kReadyRunAt, "run_at", TIMESTAMPTZOID},
                                        {kReadyId, "id", INT8OID},
                                        {kReadyKey, "key", TEXTOID},
                                        {kReadyVersion, "version", TEXTOID}};
const char* const kReadyColumnNames[] = {"queue", "priority", "run_at", "id", "key", "version", "key_order"};

const char* const kDependencyColumnNames[] = {"parent_id", "child_queue", "child_id"};

// The next slot of `slots` to fill, made at first use (in `home`: rows
// are freed batch by batch, slots last the call), emptied.
TupleTableSlot* next_slot(Relation table, TupleTableSlot** slots, int* made, int index, MemoryContext home) {
    if (index == *made) {
        MemoryContext outer = MemoryContextSwitchTo(home);
        slots[(*made)++] = table_slot_create(table, nullptr);
        MemoryContextSwitchTo(outer);
    }
    TupleTableSlot* slot = slots[index];
    ExecClearTuple(slot);
    memset(slot->tts_isnull, true, slot->tts_tupleDescriptor->natts * sizeof(bool));
    return slot;
}

void set(TupleTableSlot* slot, AttrNumber at, Datum value, bool is_null = false) {
    slot->tts_values[at - 1] = value;
    slot->tts_isnull[at - 1] = is_null;
}

void set(TupleTableSlot* slot, AttrNumber at, const std::optional<Datum>& value) {
    set(slot, at, value.value_or(0), !value.has_value());
}

// Writes `count` buffered rows and their index entries, then empties them.
void write_rows(Relation table, TupleTableSlot** slots, int count, IndexEntries* entries,
                Snapshot snapshot, CommandId command) {
    if (count == 0) return;
    table_multi_insert(table, slots, count, command, 0, nullptr);
    for (int i = 0; i < count; i++) {
        entries->insert(table, slots[i], /*update=*/false, snapshot, command);
        ExecClearTuple(slots[i]);
    }
}

}  // namespace

void RowBuffer::start() {
    entries.init();
    slots_made = buffered = 0;
    home = CurrentMemoryContext;
}

TupleTableSlot* RowBuffer::next() {
    return next_slot(table, slots, &slots_made, buffered, home);
}

void RowBuffer::keep(TupleTableSlot* slot) {
    require_not_null(table, slot->tts_isnull);
    ExecStoreVirtualTuple(slot);
    buffered++;
}

void RowBuffer::flush(Snapshot snapshot, CommandId command) {
    write_rows(table, slots, buffered, &entries, snapshot, command);
    buffered = 0;
}

void RowBuffer::close() {
    entries.close();
    for (int i = 0; i < slots_made; i++) ExecDropSingleTupleTableSlot(slots[i]);
    index_close(index, NoLock);
    table_close(table, NoLock);
}

void ReadyInserts::open(const char* function) {
    start();
    // On a distributed pg_wf, the local shard of the group's wf.ready.
    ShardGroup* group = current_shard_group();
    open_hot_table(function, "ready", "ready_claim_order", group != nullptr ? group->ready_suffix.c_str() : "",
                   kInsert, kReadyColumns, lengthof(kReadyColumns), 1, &table, &index);
    require_only_columns(table, kReadyColumnNames, lengthof(kReadyColumnNames));
    key_order_at = column_number_if_any(table, "key_order", BOOLOID);
    always_key_order = group != nullptr || !database_worker_alive(MyDatabaseId);
}

void ReadyInserts::add(Datum queue, int32 priority, Datum run_at, int64 id, Datum key, bool key_null,
                       Datum version, bool version_null, bool key_order) {
    TupleTableSlot* r = next();
    set(r, kReadyQueue, queue);
    set(r, kReadyPriority, Int32GetDatum(priority));
    set(r, kReadyRunAt, run_at);
    set(r, kReadyId, Int64GetDatum(id));
    set(r, kReadyKey, key, key_null);
    set(r, kReadyVersion, version, version_null);
    if (key_order_at != 0) set(r, key_order_at, BoolGetDatum(key_order || always_key_order));
    keep(r);
}

const ExpectedColumn kDependencyColumns[3] = {{kDependencyParentId, "parent_id", INT8OID},
                                              {kDependencyChildQueue, "child_queue", TEXTOID},
                                              {kDependencyChildId, "child_id", INT8OID}};

void DependencyInserts::open(const char* function) {
    if (current_shard_group() != nullptr) elog(ERROR, "pg_wf: edges of a shard group are inserted by SQL");
    start();
    open_hot_table(function, "dependency", "dependency_pkey", "", kInsert, kDependencyColumns,
                   lengthof(kDependencyColumns), 3, &table, &index);
    require_only_columns(table, kDependencyColumnNames, lengthof(kDependencyColumnNames));
}

void DependencyInserts::add(int64 parent_id, Datum child_queue, int64 child_id) {
    TupleTableSlot* r = next();
    set(r, kDependencyParentId, Int64GetDatum(parent_id));
    set(r, kDependencyChildQueue, child_queue);
    set(r, kDependencyChildId, Int64GetDatum(child_id));
    keep(r);
}

void JobInserts::open(const char* function) {
    now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
    job_entries.init();
    job_slots_made = buffered_jobs = 0;
    // On a distributed pg_wf, the local shards of the queue's group.
    ShardGroup* group = current_shard_group();
    const char* suffix = group != nullptr ? group->job_suffix.c_str() : "";
    open_hot_table(function, "job", "job_pkey", suffix, kInsert, job_key_columns("job_pkey", suffix), 2, 2,
                   &jobs, &job_index);
    require_only_columns(jobs, kJobColumnNames, lengthof(kJobColumnNames));
    ready.open(function);
    // The node's own sequence (a distributed pg_wf gives each node a range).
    sequence = wf_relation_oid("job_id_seq");
    if (!OidIsValid(sequence)) unexpected_table_shape("job", "its sequence wf.job_id_seq is missing");
    priority_at = column_number(jobs, "priority", INT4OID);
    created_at_at = column_number(jobs, "created_at", TIMESTAMPTZOID);
    workflow_id_at = column_number(jobs, "workflow_id", UUIDOID);
    max_attempts_at = column_number(jobs, "max_attempts", INT4OID);
    attempt_budget_at = column_number(jobs, "attempt_budget", INT4OID);
    status_at = column_number(jobs, "status", TEXTOID);
    attempt_at = column_number(jobs, "attempt", INT4OID);
    run_at_at = column_number(jobs, "run_at", TIMESTAMPTZOID);
    finished_at_at = column_number(jobs, "finished_at", TIMESTAMPTZOID);
    pending_deps_at = column_number(jobs, "pending_deps", INT4OID);
    has_dependents_at = column_number(jobs, "has_dependents", BOOLOID);
    cancel_requested_at = column_number(jobs, "cancel_requested", BOOLOID);
    cancelled_by_at = column_number(jobs, "cancelled_by", INT8OID);
    last_error_at = column_number(jobs, "last_error", TEXTOID);
    step_name_at = column_number(jobs, "step_name", TEXTOID);
    idempotency_key_at = column_number(jobs, "idempotency_key", TEXTOID);
    depends_on_at = column_number(jobs, "depends_on", INT8ARRAYOID);
    payload_at = column_number(jobs, "payload", JSONBOID);
    key_at = column_number(jobs, "key", TEXTOID);
    dedup_key_at = column_number(jobs, "dedup_key", TEXTOID);
    max_run_time_at = column_number(jobs, "max_run_time", INTERVALOID);
    start_by_at = column_number(jobs, "start_by", TIMESTAMPTZOID);
    version_at = column_number(jobs, "version", TEXTOID);
    child_of_at = column_number(jobs, "child_of", INT8OID);
    begin_direct_statement(&snapshot, &command);
    rows = AllocSetContextCreate(CurrentMemoryContext, "pg_wf enqueue", ALLOCSET_DEFAULT_SIZES);
}

int64 JobInserts::add(const NewJob& job, Datum child_of, bool child_of_null) {
    if (job.idempotency_key) elog(ERROR, "pg_wf: a job with an idempotency key is inserted by SQL");
    int64 id = job.id != 0 ? job.id : nextval_internal(sequence, /*check_permissions=*/true);
    MemoryContext outer = MemoryContextSwitchTo(rows);
    bool pending = std::strcmp(job.status, "pending") == 0;
    Datum run_at = job.run_at.value_or(now);
    TupleTableSlot* row = next_slot(jobs, job_slots, &job_slots_made, buffered_jobs, outer);
    set(row, kJobQueue, job.queue);
    set(row, kJobId, Int64GetDatum(id));
    set(row, priority_at, Int32GetDatum(job.priority));
    set(row, created_at_at, now);
    set(row, workflow_id_at, job.workflow_id);
    set(row, max_attempts_at, Int32GetDatum(job.max_attempts));
    set(row, attempt_budget_at, Int32GetDatum(job.max_attempts));
    set(row, status_at, CStringGetTextDatum(job.status));
    set(row, attempt_at, Int32GetDatum(0));
    set(row, run_at_at, run_at);
    set(row, finished_at_at, now, std::strcmp(job.status, "cancelled") != 0);
    set(row, pending_deps_at, Int32GetDatum(job.pending_deps));
    set(row, has_dependents_at, BoolGetDatum(job.has_dependents));
    set(row, cancel_requested_at, BoolGetDatum(false));
    set(row, cancelled_by_at, Int64GetDatum(job.cancelled_by), job.cancelled_by == 0);
    if (!job.last_error.empty())
        set(row, last_error_at,
            PointerGetDatum(cstring_to_text_with_len(job.last_error.data(), job.last_error.size())));
    set(row, step_name_at, job.step_name);
    if (!job.depends_on.empty()) {
        int n = static_cast<int>(job.depends_on.size());
        Datum* ids = static_cast<Datum*>(palloc(n * sizeof(Datum)));
        for (int i = 0; i < n; i++) ids[i] = Int64GetDatum(job.depends_on[i]);
        set(row, depends_on_at,
            PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)));
    }
    set(row, payload_at, job.payload);
    set(row, key_at, job.key);
    set(row, dedup_key_at, job.dedup_key);
    set(row, max_run_time_at, job.max_run_time);
    set(row, start_by_at, job.start_by);
    set(row, version_at, job.version);
    set(row, child_of_at, child_of, child_of_null);
    // A NOT NULL a hand added, as the executor would refuse it.
    require_not_null(jobs, row->tts_isnull);
    ExecStoreVirtualTuple(row);
    buffered_jobs++;
    if (pending)
        ready.add(job.queue, job.priority, run_at, id, job.key.value_or(0), !job.key, job.version.value_or(0),
                  !job.version, job.key_order);
    MemoryContextSwitchTo(outer);
    if (buffered_jobs == kInsertBatch) flush();
    return id;
}

void JobInserts::flush() {
    write_rows(jobs, job_slots, buffered_jobs, &job_entries, snapshot, command);
    ready.flush(snapshot, command);
    buffered_jobs = 0;
    MemoryContextReset(rows);
}

void JobInserts::close() {
    job_entries.close();
    for (int i = 0; i < job_slots_made; i++) ExecDropSingleTupleTableSlot(job_slots[i]);
    ready.close();
    MemoryContextDelete(rows);
    UnregisterSnapshot(snapshot);
    index_close(job_index, NoLock);
    table_close(jobs, NoLock);
}

}  // namespace wf::pg
