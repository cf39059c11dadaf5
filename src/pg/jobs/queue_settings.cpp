#include <unordered_map>

#include "pg/jobs/queue_settings.hpp"
#include "pg/base/spi.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
}

namespace wf::pg {
namespace {

PreparedStatement read_queue_config(
    "SELECT lease, max_running IS NOT NULL, paused, max_attempts FROM wf.queue_config"
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
    if (read_queue_config.execute(p.values, p.nulls) == 1) {
        if (!column_is_null(0, 1)) {
            settings.has_lease = true;
            settings.lease = *DatumGetIntervalP(column(0, 1));
        }
        settings.has_max_running = column_bool(0, 2);
        settings.paused = column_bool(0, 3);
        settings.max_attempts = column_int32(0, 4);
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
