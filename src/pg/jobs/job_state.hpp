// The job state machine: every move of a job between states, and the SQL
// fragments that keep its invariants, written once. The SQL functions in
// src/pg/api read their arguments and call these; the reaper and the
// worker call them too. Everything here runs inside an open SPI scope.
//
//                      release: its last parent is done
//              blocked ------------------------------------+
//                 ^                                        v
//   enqueue ------+------------------------------------> pending <---------+
//                                                        |     ^           |
//                                                  claim |     | fail,     | signal
//                                                        v     | retries   | or timeout
//   done <------------------ complete --------------- running  | left;     |
//   failed <--- fail (spent, permanent), recover (spent)  |  |  | snooze;   |
//   cancelled <--- cancel; a parent failed or cancelled   |  |  | recover   |
//                                                         |  +--+        waiting
//                                                         +---- await ----^
//
//  state                       transition (function here)             new state
//  --------------------------  -------------------------------------  ----------------------
//  (none)                      enqueue (insert_job, insert_pending_jobs) pending, blocked,
//                                                                      cancelled (parent failed)
//  blocked                     release (dependencies.hpp)             pending
//  pending                     claim (claim_jobs)                     running
//  running                     complete (complete_job, complete_jobs) done
//  running                     fail (fail_job)                        pending (after backoff),
//                                                                      failed (spent, permanent)
//  running                     park (park_as_pending, park_as_waiting) pending (snooze), waiting
//  waiting                     signal, timeout (wake_waiting_jobs)     pending
//  running                     recover (recover_claims,               pending, failed (spent)
//                              recover_lost_claims): owner gone,
//                              lease or max_run_time expired, claim
//                              lost in a crash
//  blocked, pending (never     start-by deadline passed               failed
//  started)                    (fail_unstarted_jobs)
//  blocked, pending, waiting   cancel (cancel_job,                    cancelled
//                              cancel_workflow_steps), or a parent
//                              failed (dependencies.hpp)
//  failed                      cancel (cancel_job): given up          cancelled
//  running                     cancel                                 flagged: ends cancelled
//                                                                      whichever way it stops
//  failed, cancelled           retry (retry_job)                      pending or blocked; the
//                                                                      jobs its failure cancelled
//                                                                      come back blocked on it
//
// Invariants, and the fragment that keeps each:
//  * a pending job that no claim holds has exactly one row in wf.ready, keyed
//    (queue, priority, run_at, id) by the job's own values: WF_SQL_ENTER_READY,
//    WF_SQL_READY_ROW_OF;
//  * a running job's row says `pending` one attempt behind, and its claim row
//    (unlogged wf.claim) holds the running attempt -- a claim writes no job
//    row (pg_wf.sql): WF_SQL_ROW_RUNS, WF_SQL_JOB_RUNNING;
//  * every worker write is fenced by the token (queue, id, attempt):
//    WF_SQL_TOKEN_HOLDS; the end of an attempt writes the claim's attempt
//    into the job row and removes the claim: WF_SQL_END_ATTEMPT,
//    WF_SQL_END_CLAIM;
//  * locks are taken job row first, then its claim or ready row, children
//    in (queue, id) order: no two transitions deadlock.
#pragma once

#include <optional>

#include "pg/base/spi.hpp"
#include "pg/jobs/flow_control.hpp"

// The default budget of attempts (wf_configure_queue's max_attempts).
#define WF_DEFAULT_MAX_ATTEMPTS 5
#define WF_SQL_DEFAULT_MAX_ATTEMPTS "5"
static_assert(WF_DEFAULT_MAX_ATTEMPTS == 5, "WF_SQL_DEFAULT_MAX_ATTEMPTS says 5");

// SQL: job row J runs attempt A -- it says pending one attempt behind.
#define WF_SQL_ROW_RUNS(J, A) "(" J ".attempt + 1 = " A " AND " J ".status = 'pending')"

// SQL: job row J is running (a claim holds its next attempt).
#define WF_SQL_JOB_RUNNING(J)                                                      \
    "(" J ".status = 'pending' AND EXISTS (SELECT 1 FROM wf.claim rc"              \
    " WHERE rc.queue = " J ".queue AND rc.id = " J ".id AND " WF_SQL_ROW_RUNS(J, "rc.attempt") "))"

// SQL over job row j and claim row c: the token ($1, $2, $3) holds.
#define WF_SQL_TOKEN_HOLDS                                                         \
    "j.queue = $1 AND j.id = $2 AND " WF_SQL_ROW_RUNS("j", "$3")                   \
    " AND c.queue = $1 AND c.id = $2 AND c.attempt = $3"

// The end of an UPDATE wf.job j that ends attempt $3 (its last SET item,
// FROM and WHERE): the job row takes the claim's attempt, worker and start.
#define WF_SQL_END_ATTEMPT                                                         \
    " attempt = c.attempt, started_at = c.started_at, worker = c.worker,"        \
    " progress = coalesce(c.progress, j.progress)"                               \
    " FROM wf.claim c WHERE " WF_SQL_TOKEN_HOLDS

// A CTE `released` that removes the claim of token ($1, $2, $3) once the
// CTE named CHANGED (the job row's update) changed the row.
#define WF_SQL_END_CLAIM(CHANGED)                                                  \
    " released AS (DELETE FROM wf.claim c"                                         \
    " WHERE c.queue = $1 AND c.id = $2 AND c.attempt = $3"                         \
    " AND EXISTS (SELECT 1 FROM " CHANGED "))"

// A CTE `ready` that gives the jobs of CTE FROM (columns queue, priority,
// run_at, id, key and, with the filter, status) their ready rows. The _NEW form
// is for jobs just inserted: their new ids cannot conflict, and ON CONFLICT
// would make every insert a speculative one (an index check and a WAL
// record more).
#define WF_SQL_ENTER_READY(FROM, WHERE)                                            \
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id, key, version)"           \
    " SELECT queue, priority, run_at, id, key, version FROM " FROM " " WHERE " ON CONFLICT DO NOTHING)"
#define WF_SQL_ENTER_READY_NEW(FROM, WHERE)                                        \
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id, key, version)"           \
    " SELECT queue, priority, run_at, id, key, version FROM " FROM " " WHERE ")"
#define WF_SQL_IF_PENDING "WHERE status = 'pending'"

// SQL: the claims of the queue whose wf.queue_config row is C go key by key
// (FlowControl::by_key(), flow_control.hpp).
#define WF_SQL_CLAIMS_BY_KEY(C)                                                    \
    "(" C ".fair OR " C ".ordered OR " C ".key_concurrency IS NOT NULL OR " C      \
    ".key_rate_limit IS NOT NULL)"

// SQL: ready row R is the one of job row J.
#define WF_SQL_READY_ROW_OF(J, R)                                                  \
    R ".queue = " J ".queue AND " R ".priority = " J ".priority AND " R            \
    ".run_at = " J ".run_at AND " R ".id = " J ".id"

namespace wf::pg {

// The current time as a timestamptz Datum; claims and sweeps use the clock,
// not the transaction start, so a long wait sees jobs that became due.
inline Datum clock_now() { return TimestampTzGetDatum(GetCurrentTimestamp()); }

// The fencing token of a worker write: attempt `attempt` of job (queue, id).
struct FencingToken {
    Datum queue;             // text
    std::string_view queue_name;
    int64 id;
    int32 attempt;
};

// ---- enqueue: -> pending, blocked, or cancelled (a failed dependency) ----
struct NewJob {
    Datum queue = 0;
    int64 id = 0;  // drawn from wf.job_id_seq when 0
    bool has_dependents = false;  // a workflow's step that others run after
    const char* status = "pending";
    Datum payload = 0;
    std::optional<Datum> run_at;  // none: now
    int32 priority = 0;
    int32 max_attempts = WF_DEFAULT_MAX_ATTEMPTS;
    std::optional<Datum> idempotency_key, workflow_id, step_name;
    std::vector<int64> depends_on;  // sorted, unique
    int32 pending_deps = 0;
    std::string last_error;    // empty: none
    int64 cancelled_by = 0;    // a failed dependency, or 0
    // Flow control (flow_control.hpp): the job's key, its dedup key, its
    // longest run and the time it must start by.
    std::optional<Datum> key, dedup_key, max_run_time, start_by;
    std::optional<Datum> version;  // text (workflows 2)
    // Its ready row goes in ready_key_order: false only when the queue's
    // claims do not go key by key (QueueSettings::flow.by_key()).
    bool key_order = true;
};
// The new job's id; none when its idempotency key is taken (the insert
// waited for a racing one to commit). `child_of`: the parent job of the
// child workflow the job is enqueued into (child_workflow_parent).
std::optional<int64> insert_job(const NewJob& job, std::optional<int64> child_of);
// The parent job of workflow `workflow_id` if it is a child workflow: a job
// enqueued into it belongs to that parent too. A child still being created
// (its transaction open) is waited for, until it commits or rolls back;
// so an enqueue asks this before it locks anything else. Read in the latest
// snapshot: a transaction snapshot (REPEATABLE READ) taken before the
// child's commit would not show it.
std::optional<int64> child_workflow_parent(Datum workflow_id);
// Before a new child workflow's id leaves the transaction that creates it:
// locks it until that transaction ends (child_workflow_parent waits for
// it). On one server: on a distributed pg_wf an enqueue runs on the node
// of its queue, which this lock does not reach.
void lock_new_child_workflow(const pg_uuid_t& workflow_id);
// The job that holds an idempotency key, and whether its payload is `payload`.
struct KeyHolder {
    int64 id;
    bool same_payload;
};
std::optional<KeyHolder> find_job_by_key(Datum queue, Datum key, Datum payload);
// One pending job per element of a jsonb array, in order, with the key of
// the same place in `keys` (a text[] as long as it, or none); their ids.
std::vector<int64> insert_pending_jobs(Datum queue, Datum payloads, int32 max_attempts,
                                       std::optional<Datum> keys, std::optional<Datum> version,
                                       bool key_order);

// Dedup windows: the active job (blocked, pending, running or waiting)
// that holds `dedup_key` in the queue, locked for this transaction (a
// racing enqueue with the same key waits here); none if no job holds it.
std::optional<int64> lock_dedup_key(Datum queue, Datum dedup_key);
// The key now belongs to job `id`.
void hold_dedup_key(Datum queue, Datum dedup_key, int64 id);
// Debounce: a job still waiting in the ready set takes the new payload and
// run_at (none: now) and keeps its place otherwise; false if it is not
// there any more (it started, or waits on dependencies or an event).
bool replace_ready_job(Datum queue, int64 id, Datum payload, std::optional<Datum> run_at);

// ---- claim: pending -> running ----
// wf_claim's result columns, in order.
enum ClaimColumn : int {
    kClaimId, kClaimAttempt, kClaimQueue, kClaimPayload, kClaimWorkflowId, kClaimStepName,
    kClaimPriority, kClaimMaxAttempts, kClaimIdempotencyKey, kClaimInputs, kClaimLeaseExpiresAt,
    kClaimCheckpoints, kClaimEvents, kClaimColumns
};
struct ClaimedJob {
    Datum values[kClaimColumns];
    bool nulls[kClaimColumns];
    int32 priority;
    TimestampTz run_at;
    int64 id;
    // Still to read: the results of the jobs it depends on (it has
    // depends_on), the checkpoints of earlier attempts (not its first).
    bool reads_inputs;
    bool reads_checkpoints;
};
struct ClaimOwner {
    Datum worker;                 // text
    std::optional<Interval> lease;
    std::optional<Interval> max_run_time;  // the queue's, for jobs without their own
};
// Takes up to `limit` due jobs of the queue for this session, in claim
// order (priority desc, run_at, id), as `flow` allows (flow_control.hpp;
// nullptr: no limits). *retry_after_ms: see FlowPick.
// With `versions` (text datums), only jobs of those versions.
std::vector<ClaimedJob> claim_jobs(Datum queue, const ClaimOwner& owner, int limit,
                                   const FlowControl* flow = nullptr,
                                   long* retry_after_ms = nullptr,
                                   const std::vector<Datum>* versions = nullptr);
// Running jobs of the queue (for max_running).
int64 count_running(Datum queue);
// Milliseconds until the queue's next scheduled job is due, or -1.
long ms_until_next_due(Datum queue);
// The claim still holds: extends its lease (by `extend`, else its own);
// false for a stale token or a requested cancellation.
bool heartbeat(const FencingToken& token, const Interval* extend);

// ---- the end of an attempt: running -> done, pending, failed, cancelled ----
// Completes the attempt; false for a stale token. *done: it ended done (not
// cancelled by a request while it ran). Releases or cancels dependents.
bool complete_job(const FencingToken& token, std::optional<Datum> result, bool* done = nullptr);
// The same for many attempts of one queue (`count` of them); the ids that
// ended done.
std::vector<int64> complete_jobs(Datum queue, Datum ids, Datum attempts,
                                 std::optional<Datum> results, size_t count);
// Fails the attempt: retried after `retry_in_seconds` (none: the queue's
// backoff), failed when spent or permanent, cancelled when requested.
// Returns the new status, or nullptr for a stale token.
const char* fail_job(const FencingToken& token, Datum error, std::optional<double> retry_in_seconds,
                     bool permanent);

// ---- park: running -> pending (snooze) or waiting (await) ----
// The running attempt, locked as a completion locks it; none for a stale
// token. A job whose cancellation was requested must complete, not park.
struct RunningAttempt {
    bool cancel_requested = false;
    std::optional<pg_uuid_t> workflow_id;  // a workflow step's
    std::optional<std::string> version;
    std::optional<int64> child_of;         // a child workflow's step: its parent job
};
std::optional<RunningAttempt> lock_running_attempt(const FencingToken& token);
// The attempt in the first row of `rows` (columns cancel_requested,
// workflow_id, version, child_of), as lock_running_attempt reads it.
RunningAttempt running_attempt_of(const Rows& rows);
// Back to pending at `run_at`; with an event, it is delivered (signalled
// with `payload`, JSON null if none). The parked attempt is not spent.
void park_as_pending(const FencingToken& token, Datum run_at, std::optional<Datum> event,
                     std::optional<Datum> payload);
// Waiting for `event` (until `timeout`, if any).
void park_as_waiting(const FencingToken& token, Datum event, const Interval* timeout);
// waiting -> pending: the jobs waiting on `event` (signalled with `payload`),
// or with no event those whose timeout passed. Returns the jobs woken.
int64 wake_waiting_jobs(std::optional<Datum> event, std::optional<Datum> payload);
// wf_signal: the signal is recorded (kept: a job that awaits the event
// later goes on at once) and the jobs waiting on it are woken; their count.
int64 signal_event(Datum event, std::optional<Datum> payload);
// On a distributed pg_wf, in one shard group: wakes the jobs whose event
// the group's copy of wf.event has signalled (a wait that came in after the
// signal's own wake-up looked for it).
int64 wake_signalled_jobs();

// ---- recover: running -> pending, or failed when spent ----
// Owner keys of the sessions that hold claims.
std::vector<int64> claim_owner_keys();
// Recovers the claims of the owners in `dead_owners` and those whose lease
// expired. The ids of the jobs that ended (failed, cancelled) are appended
// to `finished`; returns the jobs recovered.
int64 recover_claims(const std::vector<int64>& dead_owners, std::vector<int64>* finished);
// Whether the claim table survived since the last look (it is unlogged: a
// crash or a promotion empties it, sentinel row included).
bool claims_survived();
// On a distributed pg_wf: forgets the sentinels of groups no longer placed
// on this node (moved away, split), so that one that comes back after a
// crash elsewhere is recovered here.
void forget_groups_elsewhere(const std::vector<int64>& local_job_shards);
// Start-by deadlines: jobs that never started and whose start_by passed go
// to failed. Their ids are appended to `finished`; returns how many.
int64 fail_unstarted_jobs(std::vector<int64>* finished);
// Recovers jobs whose claim was lost (`how`: "the server restarted"...),
// their attempt counted, and plants the sentinel row.
int64 recover_lost_claims(const char* how, std::vector<int64>* finished);

// ---- operator actions ----
// blocked/pending/waiting/failed -> cancelled; running: flagged. False if
// none of those.
bool cancel_job(Datum queue, int64 id);
// failed/cancelled -> pending or blocked, with a fresh attempt budget; the
// jobs its failure cancelled come back blocked on it.
bool retry_job(Datum queue, int64 id);
// Every unfinished step of a workflow: cancelled, or flagged if running.
// `mark`: the workflow's row records the cancel too (on a distributed
// pg_wf the coordinator writes it, once for every shard group).
int32 cancel_workflow_steps(Datum workflow_id, bool mark = true);

}  // namespace wf::pg
