// Reading and ending claims (wf.claim rows) without the executor.
#pragma once

#include <vector>

#include "pg/base/postgres.hpp"

namespace wf::pg {

// What an attempt's end copies from its claim into the job row.
struct ClaimRead {
    int32 attempt;
    Datum started_at;  // timestamptz, or null
    bool started_at_null;
    Datum worker;      // text, or null (valid until the claim table closes)
    bool worker_null;
    Datum progress;    // jsonb, or null
    bool progress_null;
};

// wf.claim of one queue, open for the statements of one call: the executor's
// checks are made once (direct_table.hpp), then each claim costs one descent
// of claim_pkey. Plain C: every member runs inside call().
struct ClaimTable {
    Relation table;
    Relation index;
    Snapshot snapshot;
    CommandId command;
    TupleTableSlot* slot;
    Datum queue;
    AttrNumber attempt_at, worker_at, started_at_at, progress_at;

    void open(Datum queue_text, const char* function);
    void close();
    // Claim (queue, id), read into *out; false if there is none.
    bool read(int64 id, ClaimRead* out);
    // Deletes claim (queue, id). Only a lease renewal can be writing it (the
    // caller has locked the job row): the delete waits for it, as the
    // executor would, and in READ COMMITTED deletes the renewed row (in
    // REPEATABLE READ or SERIALIZABLE, 40001).
    void end(int64 id);
};

// Deletes the claims of jobs `ids` of `queue` (ClaimTable::end). Through SQL
// the same delete of a batch was planned, for a table whose statistics say
// one row, as a scan of the queue's whole range of claim_pkey with the ids
// as a filter.
void end_claims(Datum queue, const std::vector<int64>& ids);

}  // namespace wf::pg
