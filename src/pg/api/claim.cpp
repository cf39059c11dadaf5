// wf_claim (with wait), wf_complete_and_claim and wf_heartbeat: taking jobs
// and keeping them. The take itself is a transition (job_state.hpp); this
// file decides how many a claim may take and how a claimer waits.
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/frame.hpp"
#include "pg/citus/ownership.hpp"
#include "pg/api/queue_settings.hpp"
#include "pg/runtime/metrics.hpp"
#include "pg/runtime/ownership.hpp"
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/wakeup.hpp"
#include "pg/api/waiting.hpp"


namespace wf::pg {
namespace {

// With max_running set, claimers of the queue take turns on its config row,
// so that the running count they read cannot be outdated by a racing claim.
PreparedStatement lock_queue_config(
    "SELECT max_running FROM wf.queue_config WHERE queue = $1 FOR UPDATE", {TEXTOID});

// A lease of `ms` milliseconds.
Interval interval_from_ms(int ms) {
    Interval lease{};
    lease.time = int64{ms} * 1000;
    return lease;
}

struct ClaimRequest {
    Datum queue;
    Datum worker;
    int max_jobs;
    Interval* lease;  // nullptr: the queue's lease, if any
    std::optional<std::vector<Datum>> versions;  // only jobs of these versions
};


// How many jobs this claim may take (0 when paused or at max_running), and
// who owns them (the claim's lease, else the queue's).
int claim_limit(const ClaimRequest& req, const QueueSettings& settings, ClaimOwner* owner) {
    owner->worker = req.worker;
    owner->max_run_time = settings.max_run_time;
    if (req.lease)
        owner->lease = *req.lease;
    else if (settings.has_lease)
        owner->lease = settings.lease;
    else if (default_lease_ms > 0)
        owner->lease = interval_from_ms(default_lease_ms);
    if (settings.paused) return 0;
    if (!settings.has_max_running) return req.max_jobs;

    Params<1> q;
    q.set(0, req.queue);
    // The count is read with the latest snapshot, whatever the isolation
    // level: the claims it must see committed while this one waited.
    Rows config = lock_queue_config.execute(q.values, q.nulls);
    if (config.empty() || config.is_null(0, "max_running")) return req.max_jobs;
    int64 room = config.int32_at(0, "max_running") - count_running(req.queue);
    return static_cast<int>(std::clamp<int64>(room, 0, req.max_jobs));
}

// One try. *retry_after_ms: when flow control held it back, how soon to
// try again (-1: wait for a wake-up).
std::vector<ClaimedJob> claim_once(const ClaimRequest& req, long* retry_after_ms = nullptr) {
    QueueSettings settings = queue_settings(req.queue);
    if (settings.flow.rate || settings.flow.key_rate) require_rate_windows();
    ClaimOwner owner{};
    int limit = claim_limit(req, settings, &owner);
    return claim_jobs(req.queue, owner, limit, settings.flow.any() ? &settings.flow : nullptr,
                      retry_after_ms, req.versions ? &*req.versions : nullptr);
}

// A claim that holds locks until its transaction ends: the queue's settings
// row (max_running), or the keys it counted (per-key concurrency, ordered
// groups; flow_control.hpp).
bool claim_takes_locks(const QueueSettings& settings) {
    return settings.has_max_running || settings.flow.ordered || settings.flow.key_concurrency > 0;
}

// A claim under max_running locks the queue's settings row until commit. A
// waiting claimer would hold it for the whole wait and stall every other
// claimer of the queue, so each of its attempts runs in a subtransaction
// that is rolled back (lock released) when it claimed nothing.
std::vector<ClaimedJob> claim_releasing_locks(const ClaimRequest& req, long* retry_after_ms) {
    MemoryContext context = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    call([] { BeginInternalSubTransaction(nullptr); });
    MemoryContextSwitchTo(context);
    auto end_subtransaction = [&](bool keep) {
        call([&] {
            if (keep)
                ReleaseCurrentSubTransaction();
            else
                RollbackAndReleaseCurrentSubTransaction();
        });
        MemoryContextSwitchTo(context);
        CurrentResourceOwner = owner;
    };
    std::vector<ClaimedJob> jobs;
    try {
        jobs = claim_once(req, retry_after_ms);
    } catch (...) {
        // An error inside (a lease past the end of time, a lock or statement
        // timeout, a cancel) ends the subtransaction here, so the error then
        // aborts the caller's transaction as a whole, as any statement's
        // would; left open, it would leave the session unable to roll back.
        end_subtransaction(false);
        throw;
    }
    // Committing the subtransaction keeps its SPI results (the rows' datums).
    end_subtransaction(!jobs.empty());
    return jobs;
}

// Registered as a waiter for as long as it lives, also when an error (a
// cancelled query) unwinds the wait.
class WaitRegistration {
public:
    explicit WaitRegistration(uint32 hash) { begin_waiting(hash); }
    ~WaitRegistration() { end_waiting(); }
};

// The claim arguments of wf_claim and wf_complete_and_claim, from `first`
// on: worker, max_jobs, lease.
ClaimRequest claim_request_args(FunctionCallInfo fcinfo, int first) {
    ClaimRequest req{};
    req.queue = PG_GETARG_DATUM(0);
    if (PG_ARGISNULL(first)) {
        std::string name = "pid " + std::to_string(MyProcPid);
        req.worker = call([&] { return CStringGetTextDatum(name.c_str()); });
    } else {
        core::validate_label(text_arg(fcinfo, first, "worker"), "worker");
        req.worker = PG_GETARG_DATUM(first);
    }
    req.max_jobs = int32_arg(fcinfo, first + 1, "max_jobs");
    core::validate_max_jobs(req.max_jobs);
    req.lease = PG_ARGISNULL(first + 2) ? nullptr : interval_arg(fcinfo, first + 2, "lease", false);
    return req;
}

// The versions a claimer runs (argument n): none when NULL.
std::optional<std::vector<Datum>> versions_arg(FunctionCallInfo fcinfo, int n) {
    if (PG_ARGISNULL(n)) return std::nullopt;
    Datum d = PG_GETARG_DATUM(n);
    ArrayType* array = call([&] { return DatumGetArrayTypeP(d); });
    int count = 0;
    Datum* elements = nullptr;
    bool* nulls = nullptr;
    call([&] { deconstruct_array(array, TEXTOID, -1, false, 'i', &elements, &nulls, &count); });
    if (count == 0)
        throw core::Error(core::sqlstate::invalid_parameter, "versions must not be empty",
                          {}, "Pass the versions this worker runs, or NULL to claim any job.");
    std::vector<Datum> versions;
    for (int i = 0; i < count; i++) {
        if (nulls[i])
            throw core::Error(core::sqlstate::null_not_allowed, "versions must not contain null");
        text* t = call([&] { return DatumGetTextPP(elements[i]); });
        core::validate_label(std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)), "version");
        versions.push_back(elements[i]);
    }
    return versions;
}

// Puts the claimed jobs in the result, after `prefix_count` columns if any.
void emit(FunctionCallInfo fcinfo, std::vector<ClaimedJob>& jobs, int prefix_count,
          const Datum* prefix, const bool* prefix_nulls) {
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    Datum values[kClaimColumns + 1];
    bool nulls[kClaimColumns + 1];
    for (ClaimedJob& job : jobs) {
        for (int i = 0; i < prefix_count; i++) values[i] = prefix[i], nulls[i] = prefix_nulls[i];
        for (int i = 0; i < kClaimColumns; i++)
            values[prefix_count + i] = job.values[i], nulls[prefix_count + i] = job.nulls[i];
        call([&] { tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls); });
    }
}

// The owner lock of this session, or on a distributed pg_wf of the client
// it serves (citus/ownership.hpp).
void hold_owner_lock() {
    int64 origin = distributed() ? with_spi([] { return citus_origin_owner_key(); }) : 0;
    call([&] { ensure_session_holds_owner_lock(origin); });
}

}  // namespace
}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;


// wf_claim(queue, worker, max_jobs, lease, wait, versions) -> TABLE(...)
WF_SQL_FUNCTION(wf_claim) {
    require_arguments(fcinfo, 6);
    std::string_view queue = queue_arg(fcinfo, 0);
    ClaimRequest req = claim_request_args(fcinfo, 1);
    req.versions = versions_arg(fcinfo, 5);
    double wait_seconds = PG_ARGISNULL(4) ? 0 : interval_seconds(interval_arg(fcinfo, 4, "wait", true));
    // Longer waits than a day are a day: the client can call again.
    wait_seconds = std::min(wait_seconds, 86400.0);

    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
    // The lock that says this session is alive, taken before any job is ours.
    hold_owner_lock();

    // The claimed rows live in SPI memory: they are emitted inside the scope.
    with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::work, queue);
        std::optional<WaitRegistration> registration;
        TimestampTz started = GetCurrentTimestamp();
        TimestampTz deadline = started + static_cast<int64>(wait_seconds * 1e6);
        if (wait_seconds > 0) {
            // Registered and latch reset before the first claim: a commit after
            // that claim's snapshot sets the latch, so no wake-up is lost.
            registration.emplace(queue_hash(queue.data(), queue.size()));
            call([] { ResetLatch(MyLatch); });
        }
        bool limited = registration && claim_takes_locks(queue_settings(req.queue));
        long retry_after_ms = -1;
        auto attempt = [&] {
            return limited ? claim_releasing_locks(req, &retry_after_ms)
                           : claim_once(req, &retry_after_ms);
        };
        std::vector<ClaimedJob> jobs = attempt();
        while (jobs.empty() && registration) {
            long remaining_ms = static_cast<long>((deadline - GetCurrentTimestamp()) / 1000);
            if (remaining_ms <= 0) break;
            long timeout = remaining_ms;
            long due = ms_until_next_due(req.queue);
            if (due >= 0) timeout = std::min(timeout, due);
            // A rate window refills, or a key another claim held is free.
            if (retry_after_ms >= 0) timeout = std::min(timeout, std::max(retry_after_ms, 1L));
            if (!shared_memory_ready()) timeout = std::min(timeout, kPollWithoutSharedMemoryMs);
            release_route_lock();
            call([&] {
                if (statement_reads_nothing_else()) MyProc->xmin = InvalidTransactionId;
                wait_for_latch_or_lost_client(timeout);
                ResetLatch(MyLatch);
                CHECK_FOR_INTERRUPTS();
                // A wf_configure_queue that woke us (unpaused) sent an invalidation.
                AcceptInvalidationMessages();
            });
            retake_route_lock();
            jobs = attempt();
        }
        if (registration) {
            count(queue, Metric::claim_waits);
            count(queue, Metric::claim_wait_micros,
                  std::max<int64>(0, GetCurrentTimestamp() - started));
        }
        emit(fcinfo, jobs, 0, nullptr, nullptr);
    });
    return 0;
}

// wf_complete_and_claim(queue, id, attempt, result, worker, max_jobs, lease)
// -> TABLE(completed, <wf_claim's columns>): a worker's next round trip in
// one call and one commit. `completed` says whether the completion counted
// (false: a stale token, nothing stored); when no job was claimed a single
// row carries it, with NULL job columns. No `wait`: it would hold the
// completion uncommitted.
WF_SQL_FUNCTION(wf_complete_and_claim) {
    require_arguments(fcinfo, 8);
    FencingToken token = fencing_token_arg(fcinfo);
    if (!PG_ARGISNULL(3)) payload_arg(fcinfo, 3, "result");
    ClaimRequest req = claim_request_args(fcinfo, 4);
    req.versions = versions_arg(fcinfo, 7);

    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
    hold_owner_lock();

    with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::work, token.queue_name);
        // True only for a job that ended done (not cancelled while it ran).
        bool done = false;
        complete_job(token, optional_arg(fcinfo, 3), &done);
        Datum completed = BoolGetDatum(done);
        bool completed_null = false;
        std::vector<ClaimedJob> jobs = claim_once(req);
        if (jobs.empty()) {
            ClaimedJob none{};
            std::fill(std::begin(none.nulls), std::end(none.nulls), true);
            jobs.push_back(none);
        }
        emit(fcinfo, jobs, 1, &completed, &completed_null);
    });
    return 0;
}

// wf_heartbeat(queue, id, attempt, extend) -> boolean: still yours?
WF_SQL_FUNCTION(wf_heartbeat) {
    FencingToken token = fencing_token_arg(fcinfo);
    Interval* extend = PG_ARGISNULL(3) ? nullptr : interval_arg(fcinfo, 3, "extend", false);
    bool yours = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::work, token.queue_name);
        return heartbeat(token, extend);
    });
    PG_RETURN_BOOL(yours);
}
