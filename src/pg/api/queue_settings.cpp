// Per-queue settings: wf_configure_queue, and the per-backend cache that
// claims and enqueues read them through.
#include "pg/api/queue_settings.hpp"

#include <unordered_map>

#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/frame.hpp"
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
PreparedStatement upsert_config(
    "INSERT INTO wf.queue_config AS c"
    "       (queue, max_attempts, backoff_base, backoff_max, lease, max_running, paused)"
    " VALUES ($1, coalesce($2, " WF_SQL_DEFAULT_MAX_ATTEMPTS "), coalesce($3, '1 second'),"
    "         coalesce($4, greatest(coalesce($3, '1 second'), '1 hour')),"
    "         nullif($5, '0'), $6, coalesce($7, false))"
    " ON CONFLICT (queue) DO UPDATE SET"
    "   max_attempts = coalesce($2, c.max_attempts),"
    "   backoff_base = coalesce($3, c.backoff_base),"
    "   backoff_max = coalesce($4, c.backoff_max),"
    "   lease = CASE WHEN $5 IS NULL THEN c.lease ELSE nullif($5, '0') END,"
    "   max_running = coalesce($6, c.max_running),"
    "   paused = coalesce($7, c.paused),"
    "   updated_at = now()"
    " RETURNING backoff_base <= backoff_max AS backoff_in_order",
    {TEXTOID, INT4OID, INTERVALOID, INTERVALOID, INTERVALOID, INT4OID, BOOLOID});


PreparedStatement read_queue_config(
    "SELECT lease, max_running IS NOT NULL AS has_max_running, paused, max_attempts"
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
        call([] { CacheRegisterRelcacheCallback(on_relcache_invalidation, 0); });
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
    }
    // Only a cache that an invalidation can reach is kept, and a bounded one
    // (a backend may see many queue names).
    constexpr size_t kMaxCachedQueues = 1024;
    if (cache.size() >= kMaxCachedQueues) cache.clear();
    if (OidIsValid(config_relid)) cache.emplace(std::move(key), settings);
    return settings;
}

void invalidate_queue_settings() {
    Oid relid = OidIsValid(config_relid) ? config_relid : lookup_config_relid();
    if (OidIsValid(relid)) call([&] { CacheInvalidateRelcacheByRelid(relid); });
}

}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_configure_queue(queue, max_attempts, backoff_base, backoff_max, lease,
//                    max_running, paused) -> void
WF_SQL_FUNCTION(wf_configure_queue) {
    std::string_view queue = queue_arg(fcinfo, 0);
    if (!PG_ARGISNULL(1)) core::validate_max_attempts(PG_GETARG_INT32(1));
    if (!PG_ARGISNULL(2)) interval_arg(fcinfo, 2, "backoff_base", false);
    if (!PG_ARGISNULL(3)) interval_arg(fcinfo, 3, "backoff_max", false);
    if (!PG_ARGISNULL(4)) interval_arg(fcinfo, 4, "lease", true);
    if (!PG_ARGISNULL(5)) core::validate_positive(PG_GETARG_INT32(5), "max_running");

    with_job_tables([&] {
        require_right(Capability::administer, queue);
        Params<7> p;
        for (int i = 0; i < 7; i++) p.set_or_null(i, PG_ARGISNULL(i), PG_GETARG_DATUM(i));
        if (!upsert_config.execute(p.values, p.nulls).bool_at(0, "backoff_in_order"))
            throw core::Error(core::sqlstate::invalid_parameter,
                              "backoff_max must not be less than backoff_base",
                              "The queue would back off from a base above its cap.");
        invalidate_queue_settings();
        // Unpaused, or room under a higher max_running: waiting claimers retry.
        note_queue_ready(queue);
    });
    PG_RETURN_VOID();
}
