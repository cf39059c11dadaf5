// wf.job's rows found, locked and updated by key without the executor
// (job_rows.cpp's completion, claim_rows.cpp's claim).
#pragma once

#include "pg/base/postgres.hpp"
#include "pg/jobs/direct_table.hpp"

extern "C" {
#include "access/genam.h"
}

namespace wf::pg {

// wf.job of one queue, open for one call: the executor's checks are made
// once (direct_table.hpp), then each row costs one descent of an index
// led by its id (job_pkey, or job_id before 1.11; the queue checked in the
// row) through one index scan, rescanned.
// Plain C: every member runs inside call().
struct JobTable {
    Relation table;
    Relation index;  // job_pkey (id, queue), or job_id (id) before 1.11
    Snapshot snapshot;
    CommandId command;
    IndexScanDesc scan;      // of it by id, rescanned for each job
    TupleTableSlot* found;   // the row as the snapshot sees it
    TupleTableSlot* locked;  // its latest version, locked
    TupleTableSlot* next;    // the version written
    Datum queue;
    IndexEntries entries;  // of updates that are not HOT

    // `writes`: direct_table.hpp's mask (kReadOnly or kUpdate).
    void open(Datum queue_text, const char* function, int writes);
    void close();
    // Job `id` as the snapshot sees it, in `found`; false if there is none.
    bool find(int64 id);
    // Job `id` locked as an UPDATE locks it, its latest version in `locked`;
    // false if there is none (gone, or already changed by this call). As
    // the executor: a row another transaction is changing is waited for; in
    // READ COMMITTED its latest version is taken, in REPEATABLE READ or
    // SERIALIZABLE its change is a serialization failure (40001).
    bool lock(int64 id);
    // The same for the row find() found last. With `skip_held`, a row
    // another transaction holds is not waited for: false, and *held set
    // (SKIP LOCKED).
    bool lock_found(bool skip_held = false, bool* held = nullptr);
    // Writes `values`/`nulls` as the locked row's new version (formed in
    // `row_context`), with its index entries when the update is not HOT.
    // Clear `next` before `row_context` is reset.
    void update(Datum* values, bool* nulls, MemoryContext row_context);

    // The same for the row find() found last, without locking it first, as
    // the executor's UPDATE writes the row its scan found: one WAL record and
    // one pass over the page instead of a lock's and then the update's. What
    // the caller checked in `found` holds when this writes: no other
    // transaction changed the row since the snapshot. A transaction changing
    // it is waited for (heap_update cannot skip one: SKIP LOCKED callers
    // lock_found() first).
    enum class Write {
        written,
        changed,  // changed by another transaction since: lock_found(), check again
        gone,     // already changed by this call
    };
    Write update_found(Datum* values, bool* nulls, MemoryContext row_context);
};

}  // namespace wf::pg
