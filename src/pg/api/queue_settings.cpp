// Per-queue settings: wf_configure_queue, and the per-backend cache that
// claims and enqueues read them through.
#include "pg/api/queue_settings.hpp"
#include "pg/base/invalidation.hpp"

#include <unordered_map>

#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/frame.hpp"
#include "pg/api/rights.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/key_order.hpp"
#include "pg/runtime/extension.hpp"
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/wakeup.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
}

namespace wf::pg {

int default_lease_ms = 0;

namespace {

// NULL keeps the current value; a lease of zero removes the queue's lease.
// Limits of flow control and max_run_time: 0 removes them, as for leases.
PreparedStatement upsert_config(
    "INSERT INTO wf.queue_config AS c"
    "       (queue, max_attempts, backoff_base, backoff_max, lease, max_running, paused,"
    "        rate_limit, rate_period, key_rate_limit, key_concurrency, fair, ordered,"
    "        max_run_time, version)"
    " VALUES ($1, coalesce($2, " WF_SQL_DEFAULT_MAX_ATTEMPTS "), coalesce($3, '1 second'),"
    "         coalesce($4, greatest(coalesce($3, '1 second'), '1 hour')),"
    "         nullif($5, '0'), nullif($6, 0), coalesce($7, false),"
    "         nullif($8, 0), $9, nullif($10, 0), nullif($11, 0), coalesce($12, false),"
    "         coalesce($13, false), nullif($14, '0'), nullif($15, ''))"
    " ON CONFLICT (queue) DO UPDATE SET"
    "   max_attempts = coalesce($2, c.max_attempts),"
    "   backoff_base = coalesce($3, c.backoff_base),"
    "   backoff_max = coalesce($4, c.backoff_max),"
    "   lease = CASE WHEN $5 IS NULL THEN c.lease ELSE nullif($5, '0') END,"
    "   max_running = CASE WHEN $6 IS NULL THEN c.max_running ELSE nullif($6, 0) END,"
    "   paused = coalesce($7, c.paused),"
    "   rate_limit = CASE WHEN $8 IS NULL THEN c.rate_limit ELSE nullif($8, 0) END,"
    "   rate_period = coalesce($9, c.rate_period),"
    "   key_rate_limit = CASE WHEN $10 IS NULL THEN c.key_rate_limit ELSE nullif($10, 0) END,"
    "   key_concurrency = CASE WHEN $11 IS NULL THEN c.key_concurrency ELSE nullif($11, 0) END,"
    "   fair = coalesce($12, c.fair),"
    "   ordered = coalesce($13, c.ordered),"
    "   max_run_time = CASE WHEN $14 IS NULL THEN c.max_run_time ELSE nullif($14, '0') END,"
    "   version = CASE WHEN $15 IS NULL THEN c.version ELSE nullif($15, '') END,"
    "   updated_at = now()"
    " RETURNING backoff_base <= backoff_max AS backoff_in_order,"
    "           NOT (ordered AND coalesce(key_concurrency, 1) > 1) AS ordering_consistent,"
    "           rate_limit IS NOT NULL OR key_rate_limit IS NOT NULL AS rate_limited,"
    "           " WF_SQL_CLAIMS_BY_KEY("c") " AS by_key",
    {TEXTOID, INT4OID, INTERVALOID, INTERVALOID, INTERVALOID, INT4OID, BOOLOID, INT4OID,
     INTERVALOID, INT4OID, INT4OID, BOOLOID, BOOLOID, INTERVALOID, TEXTOID});

// Whether the queue's claims go key by key before this call changes its
// settings (a queue without settings does not), its row locked: the change
// applies to the version read, whatever another call committed meanwhile.
PreparedStatement claimed_by_key(
    "SELECT " WF_SQL_CLAIMS_BY_KEY("c") " AS by_key FROM wf.queue_config c WHERE c.queue = $1"
    " FOR UPDATE",
    {TEXTOID});


PreparedStatement read_queue_config(
    "SELECT lease, max_running IS NOT NULL AS has_max_running, paused, max_attempts,"
    "       rate_limit, key_rate_limit,"
    "       coalesce(rate_period, '1 second') AS rate_period,"
    "       key_concurrency, fair, ordered, max_run_time, version"
    "  FROM wf.queue_config"
    " WHERE queue = $1",
    {TEXTOID});

std::unordered_map<std::string, QueueSettings> cache;
Oid config_relid = InvalidOid;  // wf.queue_config, once looked up
bool callback_registered = false;

// Runs inside PostgreSQL's invalidation processing: must not throw, and
// unordered_map::clear does not.
void on_relcache_invalidation(Datum, Oid relid) {
    if (relid == InvalidOid || relid == config_relid) {
        cache.clear();
        config_relid = InvalidOid;
    }
}

Oid lookup_config_relid() {
    return call([] {
        Oid schema = get_namespace_oid("wf", true);
        return OidIsValid(schema) ? get_relname_relid("queue_config", schema) : InvalidOid;
    });
}

}  // namespace

QueueSettings queue_settings(Datum queue) {
    if (!callback_registered) {
        call([] { listen_to_relcache(on_relcache_invalidation); });
        callback_registered = true;
    }
    if (!OidIsValid(config_relid)) {
        cache.clear();
        config_relid = lookup_config_relid();
    }
    text* t = call([&] { return DatumGetTextPP(queue); });
    std::string key(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
    if (auto it = cache.find(key); it != cache.end()) return it->second;

    QueueSettings settings;
    Params<1> p;
    p.set(0, queue);
    Rows config = read_queue_config.execute(p.values, p.nulls);
    if (config.size() == 1) {
        if (!config.is_null(0, "lease")) {
            settings.has_lease = true;
            settings.lease = *DatumGetIntervalP(config.datum(0, "lease"));
        }
        settings.has_max_running = config.bool_at(0, "has_max_running");
        settings.paused = config.bool_at(0, "paused");
        settings.max_attempts = config.int32_at(0, "max_attempts");
        const Interval* period = DatumGetIntervalP(config.datum(0, "rate_period"));
        if (!config.is_null(0, "rate_limit"))
            settings.flow.rate = rate_limit_of(config.int32_at(0, "rate_limit"), period);
        if (!config.is_null(0, "key_rate_limit"))
            settings.flow.key_rate = rate_limit_of(config.int32_at(0, "key_rate_limit"), period);
        if (!config.is_null(0, "key_concurrency"))
            settings.flow.key_concurrency = config.int32_at(0, "key_concurrency");
        settings.flow.fair = config.bool_at(0, "fair");
        settings.flow.ordered = config.bool_at(0, "ordered");
        if (!config.is_null(0, "max_run_time"))
            settings.max_run_time = *DatumGetIntervalP(config.datum(0, "max_run_time"));
        if (!config.is_null(0, "version")) settings.version = config.text_at(0, "version");
    }
    // Only a cache that an invalidation can reach is kept, and a bounded one
    // (a backend may see many queue names).
    constexpr size_t kMaxCachedQueues = 1024;
    if (cache.size() >= kMaxCachedQueues) cache.clear();
    if (OidIsValid(config_relid)) cache.emplace(std::move(key), settings);
    return settings;
}

// key_order.hpp: the settings are read from this cache only.
bool cached_claims_plainly(const char* queue, size_t len) noexcept {
    try {
        auto it = cache.find(std::string(queue, len));
        return it != cache.end() && !it->second.flow.by_key();
    } catch (...) {
        return false;
    }
}

RateLimit rate_limit_of(int32 limit, const Interval* period) {
    return RateLimit{limit, static_cast<int64>(interval_seconds(period) * 1e6)};
}

void require_rate_windows() {
    if (shared_memory_ready()) return;
    throw core::Error("55000", "rate limits need pg_wf in shared_preload_libraries",
                      "The windows of rate limits live in pg_wf's shared memory.",
                      "Add pg_wf to shared_preload_libraries and restart the server, or "
                      "remove the queue's rate limits.");
}

void invalidate_queue_settings() {
    Oid relid = OidIsValid(config_relid) ? config_relid : lookup_config_relid();
    if (OidIsValid(relid)) call([&] { CacheInvalidateRelcacheByRelid(relid); });
}

}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_configure_queue(queue, max_attempts, backoff_base, backoff_max, lease,
//                    max_running, paused, rate_limit, rate_period,
//                    key_rate_limit, key_concurrency, fair, ordered,
//                    max_run_time, version) -> void
WF_SQL_FUNCTION_ANY_SCAN(wf_configure_queue) {
    require_arguments(fcinfo, 15);
    constexpr int kArgs = 15;
    std::string_view queue = queue_arg(fcinfo, 0);
    if (!PG_ARGISNULL(1)) core::validate_max_attempts(PG_GETARG_INT32(1));
    if (!PG_ARGISNULL(2)) interval_arg(fcinfo, 2, "backoff_base", false);
    if (!PG_ARGISNULL(3)) interval_arg(fcinfo, 3, "backoff_max", false);
    if (!PG_ARGISNULL(4)) interval_arg(fcinfo, 4, "lease", true);
    // max_running => 0 removes the limit, as 0 does for the limits of flow control.
    if (!PG_ARGISNULL(5)) core::validate_not_negative(PG_GETARG_INT32(5), "max_running");
    // Limits: 0 removes one; below 0 is an error.
    if (!PG_ARGISNULL(7)) core::validate_not_negative(PG_GETARG_INT32(7), "rate_limit");
    if (!PG_ARGISNULL(8)) interval_arg(fcinfo, 8, "rate_period", false);
    if (!PG_ARGISNULL(9)) core::validate_not_negative(PG_GETARG_INT32(9), "key_rate_limit");
    if (!PG_ARGISNULL(10)) core::validate_not_negative(PG_GETARG_INT32(10), "key_concurrency");
    if (!PG_ARGISNULL(13)) interval_arg(fcinfo, 13, "max_run_time", true);
    // '' removes the default version.
    if (!PG_ARGISNULL(14)) core::validate_label(text_arg(fcinfo, 14, "version"), "version", true);

    with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::administer, queue);
        Params<kArgs> p;
        for (int i = 0; i < kArgs; i++) p.set_or_null(i, PG_ARGISNULL(i), PG_GETARG_DATUM(i));
        Rows before = claimed_by_key.execute(p.values, p.nulls);  // $1: the queue
        bool was_by_key = !before.empty() && before.bool_at(0, "by_key");
        Rows result = upsert_config.execute(p.values, p.nulls);
        if (!result.bool_at(0, "backoff_in_order"))
            throw core::Error(core::sqlstate::invalid_parameter,
                              "backoff_max must not be less than backoff_base",
                              "The queue would back off from a base above its cap.");
        if (!result.bool_at(0, "ordering_consistent"))
            throw core::Error(core::sqlstate::invalid_parameter,
                              "an ordered queue runs one job per key at a time",
                              "key_concurrency above 1 contradicts ordered.",
                              "Set key_concurrency => 0 (or 1), or ordered => false.");
        // Without shared memory every claim of the queue would fail.
        if (result.bool_at(0, "rate_limited")) require_rate_windows();
        // Ready rows are left out of the key order only where this node's
        // worker sweeps (job_inserts.hpp, ReadyInserts).
        if (result.bool_at(0, "by_key") && !was_by_key && !distributed() && schema_at_least("1.10"))
            enter_key_order(PG_GETARG_DATUM(0));
        invalidate_queue_settings();
        // Unpaused, or room under a higher max_running: waiting claimers retry.
        note_queue_ready(queue);
    });
    PG_RETURN_VOID();
}

// wf._rate_left(queue, key, rate_limit, rate_period) -> int: what the rate
// window of the queue (key NULL) or of one of its keys allows now; NULL for
// a queue the reader holds no right on, or without shared memory.
WF_SQL_FUNCTION_ANY_SCAN(wf_rate_left) {
    if (PG_ARGISNULL(0) || PG_ARGISNULL(2) || PG_ARGISNULL(3)) PG_RETURN_NULL();
    std::string_view queue = text_arg(fcinfo, 0, "queue");
    if (!shared_memory_ready() || !reader_holds_right(std::nullopt, queue)) PG_RETURN_NULL();
    std::optional<std::string_view> key;
    if (!PG_ARGISNULL(1)) key = text_arg(fcinfo, 1, "key");
    RateLimit rate = rate_limit_of(PG_GETARG_INT32(2), PG_GETARG_INTERVAL_P(3));
    if (rate.limit <= 0 || rate.period_us <= 0) PG_RETURN_NULL();
    int left = rate_left(rate_window_id(queue, key ? &*key : nullptr), rate, GetCurrentTimestamp());
    PG_RETURN_INT32(left);
}
