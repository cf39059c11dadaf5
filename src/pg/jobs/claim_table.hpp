// Reading and ending claims (wf.claim rows) without the executor.
#pragma once

#include "pg/base/postgres.hpp"

extern "C" {
#include "access/genam.h"
}

namespace wf::pg {

// What an attempt's end copies from its claim into the job row.
struct ClaimRead {
    int32 attempt;
    Datum started_at;  // timestamptz, or null
    bool started_at_null;
    Datum worker;      // text, or null (a copy in the context given to read())
    bool worker_null;
    Datum progress;    // jsonb, or null (likewise)
    bool progress_null;
};

// wf.claim of one queue, open for one call: the executor's checks are made
// once (direct_table.hpp), then each claim costs one descent of claim_pkey
// through one index scan, rescanned. Plain C: every member runs inside
// call().
struct ClaimTable {
    Relation table;
    Relation index;
    Snapshot snapshot;
    CommandId command;
    IndexScanDesc scan;
    TupleTableSlot* slot;
    Datum queue;
    AttrNumber attempt_at, worker_at, started_at_at, progress_at;

    void open(Datum queue_text, const char* function);
    void close();
    // Claim (queue, id), read into *out, its values copied into `copies`;
    // false if there is none.
    bool read(int64 id, ClaimRead* out, MemoryContext copies);
    // Deletes the claim read last (by read(id)). The caller has locked its
    // job row, so only a lease renewal or a progress report can be writing
    // it: the delete waits for that, as the executor would, and in READ
    // COMMITTED deletes the row it wrote (in REPEATABLE READ or
    // SERIALIZABLE, 40001). A progress report committed since the read is
    // not copied into the job row (nor was it by the SQL this replaced).
    void end_read(int64 id);
};

}  // namespace wf::pg
