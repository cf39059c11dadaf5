#include "pg/citus/shard_route.hpp"

#include <memory>

#include "core/error.hpp"
#include "pg/base/spi.hpp"

extern "C" {
#include "utils/inval.h"
#include "utils/lsyscache.h"
}

namespace wf::pg {
namespace {

// Backend caches, dropped whenever Citus's metadata of pg_wf's tables may
// have changed: Citus invalidates a distributed table's relcache entry
// when its shards or placements change, here and on every node with its
// metadata.
enum class Detected { unknown, single_server, distributed };
Detected detected = Detected::unknown;
std::vector<Oid> watched;  // wf's distributed tables
uint64 generation = 1;
uint64 cached_generation = 0;
std::unordered_map<std::string, int64> shard_of_queue;
std::unordered_map<int64, std::unique_ptr<ShardGroup>> groups;
bool callback_registered = false;
ShardGroup* current = nullptr;

void on_relcache_invalidation(Datum, Oid relid) {
    if (relid == InvalidOid ||
        std::find(watched.begin(), watched.end(), relid) != watched.end()) {
        generation++;
        detected = Detected::unknown;
    }
}

void register_callback() {
    if (callback_registered) return;
    call([] { CacheRegisterRelcacheCallback(on_relcache_invalidation, 0); });
    callback_registered = true;
}

Oid wf_relation(const char* name) {
    return call([&] {
        Oid schema = get_namespace_oid("wf", true);
        return OidIsValid(schema) ? get_relname_relid(name, schema) : InvalidOid;
    });
}

// Citus's statements: prepared only where Citus is installed.
PreparedStatement distributed_tables(
    "SELECT p.logicalrelid::oid AS relid FROM pg_catalog.pg_dist_partition p"
    "  JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid"
    " WHERE c.relnamespace = 'wf'::regnamespace", {});

PreparedStatement shard_for_queue(
    "SELECT pg_catalog.get_shard_id_for_distribution_column('wf.job', $1) AS shard", {TEXTOID});

// The group of wf.job's shard $1: the colocated shards of the same hash
// range, and the one shard of each reference table; and whether the group
// is placed on this node.
PreparedStatement group_names(
    "SELECT 'wf.' || c.relname AS table_name, 'wf.' || c.relname || '_' || s.shardid AS shard_name,"
    "       p.partmethod = 'n' AS replicated, s.shardid AS shard, c.relname::text AS relname"
    "  FROM pg_catalog.pg_dist_shard s"
    "  JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = s.logicalrelid"
    "  JOIN pg_catalog.pg_class c ON c.oid = s.logicalrelid"
    "  JOIN pg_catalog.pg_dist_shard j ON j.shardid = $1"
    "  JOIN pg_catalog.pg_dist_partition jp ON jp.logicalrelid = j.logicalrelid"
    " WHERE c.relnamespace = 'wf'::regnamespace"
    "   AND (p.partmethod = 'n'"
    "        OR (p.colocationid = jp.colocationid AND s.shardminvalue = j.shardminvalue))",
    {INT8OID});

PreparedStatement placed_here(
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement p, pg_catalog.pg_dist_local_group g"
    "                WHERE p.shardid = $1 AND p.groupid = g.groupid) AS here",
    {INT8OID});

PreparedStatement local_job_shard_ids(
    "SELECT s.shardid AS shard FROM pg_catalog.pg_dist_shard s"
    "  JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid"
    "  JOIN pg_catalog.pg_dist_local_group g ON g.groupid = p.groupid"
    " WHERE s.logicalrelid = 'wf.job'::regclass ORDER BY 1", {});

void drop_caches_if_stale() {
    if (cached_generation == generation) return;
    for (auto& [shard, group] : groups)
        for (auto& entry : group->plans) {
            SPIPlanPtr plan = entry.second;
            call([&] { SPI_freeplan(plan); });
        }
    groups.clear();
    shard_of_queue.clear();
    cached_generation = generation;
}

ShardGroup* group_of(int64 job_shard) {
    auto found = groups.find(job_shard);
    if (found != groups.end()) return found->second.get();
    Params<1> params;
    params.set(0, Int64GetDatum(job_shard));
    if (!placed_here.execute(params.values, params.nulls).bool_at(0, "here")) return nullptr;
    Rows rows = group_names.execute(params.values, params.nulls);
    auto group = std::make_unique<ShardGroup>();
    group->job_shard = job_shard;
    for (uint64 r = 0; r < rows.size(); r++) {
        group->names.push_back({rows.text_at(r, "table_name"), rows.text_at(r, "shard_name"),
                                rows.bool_at(r, "replicated")});
        if (rows.text_at(r, "relname") == "ready")
            group->ready_suffix = "_" + std::to_string(rows.int64_at(r, "shard"));
    }
    ShardGroup* g = group.get();
    groups.emplace(job_shard, std::move(group));
    return g;
}

// Citus's lock on a shard's metadata (its ADV_LOCKTAG_CLASS_CITUS_SHARD_METADATA
// advisory lock), in share mode, as its own writers take it: a shard move
// holds it exclusively while it ends, so a call either finishes before the
// move blocks writes or starts after the metadata says where the shard is.
void lock_shard_metadata(int64 shard) {
    call([&] {
        LOCKTAG tag;
        SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(shard >> 32),
                             static_cast<uint32>(shard), 4);
        (void) LockAcquire(&tag, ShareLock, false, false);
        AcceptInvalidationMessages();
    });
}

}  // namespace

bool distributed() {
    if (detected != Detected::unknown) return detected == Detected::distributed;
    register_callback();
    bool citus = call([] { return OidIsValid(get_extension_oid("citus", true)); });
    watched.clear();
    if (citus) {
        std::vector<int64> relids = with_spi([] { return distributed_tables.execute().int64_column("relid"); });
        for (int64 relid : relids) watched.push_back(static_cast<Oid>(relid));
    }
    Oid job = wf_relation("job");
    bool is_distributed = citus && std::find(watched.begin(), watched.end(), job) != watched.end();
    // Creating the distributed tables invalidates wf.job's entry too.
    if (OidIsValid(job) && std::find(watched.begin(), watched.end(), job) == watched.end())
        watched.push_back(job);
    detected = is_distributed ? Detected::distributed : Detected::single_server;
    return is_distributed;
}

ShardGroup* current_shard_group() { return current; }

void refuse_if_distributed() {
    if (!distributed()) return;
    throw core::Error("0A000", "this pg_wf function is not supported on a distributed pg_wf yet",
                      "A distributed pg_wf serves the calls addressed to one queue (enqueue, claim, "
                      "heartbeat, complete, fail, checkpoint, snooze, retry, cancel, "
                      "wf_configure_queue); workflows, events, schedules, grants and wf_sweep "
                      "are not distributed yet.",
                      "README, \"Scaling out\".");
}

ShardRoute::ShardRoute(Datum queue) : saved_(current) {
    if (!distributed()) return;
    char* cstring = call([&] { return TextDatumGetCString(queue); });
    std::string name(cstring);
    call([&] { pfree(cstring); });
    for (int tries = 0;; tries++) {
        drop_caches_if_stale();
        auto found = shard_of_queue.find(name);
        int64 shard;
        if (found != shard_of_queue.end()) {
            shard = found->second;
        } else {
            Params<1> params;
            params.set(0, queue);
            shard = shard_for_queue.execute(params.values, params.nulls).int64_at(0, "shard");
            shard_of_queue.emplace(name, shard);
        }
        uint64 seen = generation;
        lock_shard_metadata(shard);
        if (seen != generation && tries < 3) continue;  // moved or split meanwhile: look again
        enter(shard, name.c_str());
        return;
    }
}

ShardRoute::ShardRoute(int64 job_shard) : saved_(current) {
    if (!distributed()) return;
    drop_caches_if_stale();
    lock_shard_metadata(job_shard);
    drop_caches_if_stale();
    enter(job_shard, nullptr);
}

void ShardRoute::enter(int64 job_shard, const char* queue) {
    ShardGroup* group = group_of(job_shard);
    if (group == nullptr) {
        if (queue != nullptr)
            throw core::Error(
                "0A000", "queue \"" + std::string(queue) + "\" is served by another node",
                "On a distributed pg_wf a call runs on the node that holds its queue's shard: "
                "Citus sends it there when it is a statement of its own with the queue as a "
                "constant or parameter, not when it is called from another function or inside "
                "a larger query.",
                "Call it as SELECT ... FROM wf_claim('queue', ...) on its own.");
        throw core::Error("40001", "the shard group of wf.job's shard " + std::to_string(job_shard) +
                                       " moved to another node");
    }
    current = group;
    current_sql_route = group;
}

ShardRoute::~ShardRoute() {
    current = saved_;
    current_sql_route = saved_;
}

std::vector<int64> local_job_shards() {
    if (!distributed()) return {};
    return local_job_shard_ids.execute().int64_column("shard");
}

}  // namespace wf::pg
