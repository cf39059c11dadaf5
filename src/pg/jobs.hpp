// Job state changes shared by several SQL functions and the reaper.
// Each runs inside an open SpiConnection.
#pragma once

#include "spi.hpp"

// SQL: whether job row J (an alias) is running. A claim writes no job row
// (pg_wf--1.1--1.2.sql): the row says pending at the attempt before, and the
// claim row holds the attempt that runs.
#define WF_JOB_RUNNING(J)                                                     \
    "(" J ".status = 'pending' AND EXISTS (SELECT 1 FROM wf.claim rc"       \
    " WHERE rc.queue = " J ".queue AND rc.id = " J ".id AND rc.attempt = " J \
    ".attempt + 1))"

// SQL over job row j and claim row c: the token ($1, $2, $3) holds, i.e.
// attempt $3 of that job is running (its row says pending one attempt
// behind, its claim holds $3).
#define WF_TOKEN_HOLDS                                                        \
    "j.queue = $1 AND j.id = $2 AND j.attempt + 1 = $3 AND j.status = 'pending'" \
    " AND c.queue = $1 AND c.id = $2 AND c.attempt = $3"

// The end of an UPDATE wf.job j that ends attempt $3 (its last SET item,
// FROM and WHERE): the job row takes the claim's attempt, worker and start.
#define WF_END_ATTEMPT                                                           \
    " attempt = c.attempt, started_at = c.started_at, worker = c.worker"        \
    " FROM wf.claim c WHERE " WF_TOKEN_HOLDS

namespace wf::pg {

// Cancels, transitively, every blocked job that waits on one of `job_ids`,
// which just failed or were cancelled; their last_error reads "dependency
// job N <what_happened>", or 'step "name" (job N) <what_happened>' for a
// workflow step. Returns how many were cancelled.
uint64 cancel_dependents(const std::vector<int64>& job_ids, const char* what_happened);

// Releases the blocked children of jobs that just finished: their count of
// unfinished dependencies goes down by one per finished parent, and at zero
// they become pending. A child held by another transaction (a sibling
// parent's completion) is left to the background worker, when it runs,
// as a row in wf.release_debt.
void release_dependents(const std::vector<int64>& job_ids);

// The worker's side: applies the releases left in wf.release_debt to the
// children no other transaction holds. Returns the children updated.
int64 settle_release_debts();

// wf_complete's work: marks the job done if (queue, id, attempt) still holds
// it, stores the result, releases dependents. False for a stale token.
bool complete_job(Datum queue, Datum id, Datum attempt, Datum result, bool result_is_null);

// One reaper pass: recovers running jobs whose owner session is gone or
// whose lease expired, and once after the claim table was emptied (a crash,
// a promotion: its sentinel row is gone) the jobs whose claims went with
// it. Returns the number of jobs recovered.
int64 sweep_database();

// One retention step: deletes up to `batch` finished jobs whose finish is
// older than `keep_seconds`, walking job ids upwards from `*cursor` (ids grow
// with time). The cursor goes back to 0 when it reaches jobs too young to
// expire. Returns the number of jobs deleted.
int64 expire_finished_jobs(int64* cursor, int keep_seconds, int batch);

// Whether the extension's SQL objects are the version this library needs
// (1.2: the running state in wf.claim). Until ALTER EXTENSION pg_wf UPDATE
// has run, every SQL function raises an error and the worker leaves the
// database alone: a claim of 1.1 is a job row that 1.2 no longer reads.
bool schema_is_current();
#define WF_SCHEMA_VERSION "1.2"

// Jobs waiting on an event whose timeout passed become pending, with the
// event marked timed out. Returns how many.
int64 wake_timed_out_waits();

// Enqueues one job per due cron schedule (its latest due tick) and moves
// each schedule to its next run. Returns the jobs enqueued.
int64 fire_due_schedules();

// The current time as a timestamptz Datum; claims and sweeps use the clock,
// not the transaction start, so a long wait sees jobs that became due.
Datum clock_now();

}  // namespace wf::pg
