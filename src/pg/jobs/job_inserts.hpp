// New jobs inserted without the executor: the enqueue's job rows and the
// ready rows of those that are pending, written as COPY writes rows (heap
// multi-inserts, the executor's own index maintenance), after the checks
// the executor makes for an INSERT (direct_table.hpp).
#pragma once

#include "pg/base/postgres.hpp"
#include "pg/jobs/direct_table.hpp"

namespace wf::pg {

struct NewJob;

// Rows are buffered and written this many at a time: a multi-insert fills
// a page or two of wf.job per call; more slots cost more to make than the
// batch saves (1,000 were slower than the SQL insert).
constexpr int kInsertBatch = 64;

// Rows of one table formed into slots and written kInsertBatch at a time:
// the table's multi-insert, then each row's index entries by the
// executor's routine. Plain C: every member runs inside call().
struct RowBuffer {
    Relation table, index;
    TupleTableSlot* slots[kInsertBatch];  // rows formed, not yet written
    int slots_made, buffered;
    IndexEntries entries;
    MemoryContext home;  // of the slots: the context start() ran in

    void start();
    // The next slot to fill, emptied (every column NULL); keep() it once set.
    TupleTableSlot* next();
    // The row in `slot` is buffered (a NOT NULL added by hand refuses it, 23502).
    void keep(TupleTableSlot* slot);
    bool full() const { return buffered == kInsertBatch; }
    void flush(Snapshot snapshot, CommandId command);
    void close();
};

// wf.ready rows inserted by hand: a job that becomes pending (a new one, a
// released child) enters the ready set.
struct ReadyInserts : RowBuffer {
    // wf.ready's key_order (1.10), 0 on a schema without it.
    AttrNumber key_order_at;
    // Every row goes in the key order where no worker puts in what an
    // enqueue racing wf_configure_queue left out (key_order.hpp): on a
    // distributed pg_wf, and while no worker serves this database (pg_wf
    // not preloaded, the database not in wf.databases, a worker starting).
    bool always_key_order;

    void open(const char* function);
    // Buffers the ready row of job (queue, id) (text datums, `key` and
    // `version` may be null), which must live until the next flush(), in
    // ready_key_order unless `key_order` is false (its queue's claims do
    // not go key by key). The caller flushes when full().
    void add(Datum queue, int32 priority, Datum run_at, int64 id, Datum key, bool key_null, Datum version,
             bool version_null, bool key_order);
};

// wf.dependency's columns (sql/pg_wf.sql), all of them, its key in this order.
constexpr AttrNumber kDependencyParentId = 1, kDependencyChildQueue = 2, kDependencyChildId = 3;
extern const ExpectedColumn kDependencyColumns[3];

// wf.dependency rows inserted by hand: the edges of new workflow steps
// (wf_submit). Not on a distributed pg_wf (its groups' edges stay SQL).
struct DependencyInserts : RowBuffer {
    void open(const char* function);
    // `child_queue` (text) must live until the next flush(); the caller
    // flushes when full().
    void add(int64 parent_id, Datum child_queue, int64 child_id);
};

// wf.job and wf.ready, open for one call (on a distributed pg_wf, the
// shards of the group the call is routed to). Plain C: every member runs
// inside call().
struct JobInserts {
    Relation jobs, job_index;
    ReadyInserts ready;
    Oid sequence;  // wf.job_id_seq
    Snapshot snapshot;
    CommandId command;
    Datum now;  // timestamptz: now(), the transaction's start
    // Columns of wf.job found by name (an updated table has its added
    // columns last); wf.ready's are checked in place.
    AttrNumber priority_at, created_at_at, workflow_id_at, max_attempts_at, attempt_budget_at,
        status_at, attempt_at, run_at_at, finished_at_at, pending_deps_at, has_dependents_at,
        cancel_requested_at, cancelled_by_at, last_error_at, step_name_at, idempotency_key_at,
        depends_on_at, payload_at, key_at, dedup_key_at, max_run_time_at, start_by_at, version_at,
        child_of_at;
    // Rows formed and not yet written; their values live in `rows`.
    TupleTableSlot* job_slots[kInsertBatch];
    int job_slots_made, buffered_jobs;
    MemoryContext rows;
    IndexEntries job_entries;

    void open(const char* function);
    // Buffers the rows of `job` (its idempotency key must be none: that
    // insert is SQL's ON CONFLICT) and returns its id: job.id, or the
    // next of wf.job_id_seq if that is 0.
    int64 add(const NewJob& job, Datum child_of, bool child_of_null);
    // Writes what is buffered. Values of buffered rows may be freed after.
    void flush();
    void close();  // after flush()
};

}  // namespace wf::pg
