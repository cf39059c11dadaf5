// Claims (wf.claim rows) begun, read and ended without the executor.
#pragma once

#include "pg/base/postgres.hpp"
#include "pg/jobs/direct_table.hpp"

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

// A new claim row: the attempt a claim begins, and who owns it until when.
struct NewClaim {
    int64 id;
    int32 attempt;
    int64 owner_session;  // the key of the claiming session's owner lock
    int32 owner_pid;
    Datum worker;         // text
    const Interval* lease;  // or nullptr
    Datum lease_expires_at;  // timestamptz
    bool lease_expires_at_null;
    Datum started_at;     // timestamptz
    Datum key;            // text, or null
    bool key_null;
    Datum run_deadline;   // timestamptz
    bool run_deadline_null;
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
    TupleTableSlot* written;  // a new row (begin())
    IndexEntries entries;     // of new rows
    Datum queue;
    AttrNumber attempt_at, owner_session_at, lease_at, lease_expires_at_at, worker_at, owner_pid_at,
        started_at_at, key_at, run_deadline_at, progress_at;

    // `writes`: kDelete to end claims, kInsert | kDelete to begin them (a
    // claim an earlier attempt left behind is replaced).
    void open(Datum queue_text, const char* function, int writes);
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
    // Inserts the claim row of `claim` (formed in `row_context`), after
    // deleting a row an earlier attempt of the job left behind; false, and
    // nothing written, if a row of this attempt or a later one is there:
    // an attempt number is one owner's, and a job it would hand out twice
    // is not handed out.
    bool begin(const NewClaim& claim, MemoryContext row_context);

private:
    // Deletes the version in `slot`, then (READ COMMITTED) each later one a
    // committed change put in its place; `still_wanted` says, of each
    // later version, whether to go on. False if a version was not wanted.
    template <typename StillWanted>
    bool delete_found(int64 id, StillWanted still_wanted);
};

}  // namespace wf::pg
