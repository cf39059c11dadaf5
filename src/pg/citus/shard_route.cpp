#include "pg/citus/shard_route.hpp"
#include "pg/base/invalidation.hpp"

#include <functional>
#include <memory>

#include "core/error.hpp"
#include "pg/base/spi.hpp"

extern "C" {
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
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

// A table pg_wf did not have when it looked (one ALTER EXTENSION pg_wf
// UPDATE adds) is watched by no relcache entry; the update's new functions
// (pg_proc invalidations) tell of it.
void on_function_invalidation(Datum, int, uint32) {
    generation++;
    detected = Detected::unknown;
}

void register_callback() {
    if (callback_registered) return;
    call([] {
        listen_to_relcache(on_relcache_invalidation);
        CacheRegisterSyscacheCallback(PROCOID, on_function_invalidation, 0);
    });
    callback_registered = true;
}

Oid wf_relation(const char* name) {
    return call([&] {
        Oid schema = get_namespace_oid("wf", true);
        return OidIsValid(schema) ? get_relname_relid(name, schema) : InvalidOid;
    });
}

// Citus's statements: prepared only where Citus is installed. Every table
// of wf, each marked whether Citus distributes it: all are watched, for a
// table distributed later (wf_distribute does one table at a time, and the
// tables of a schema update come later still) changes the shard groups too.
PreparedStatement wf_tables(
    "SELECT c.oid::pg_catalog.int8 AS relid, EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p"
    "                                WHERE p.logicalrelid = c.oid) AS distributed"
    "  FROM pg_catalog.pg_class c"
    " WHERE c.relnamespace = 'wf'::regnamespace AND c.relkind IN ('r', 'p')", {});

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

// Whether the group is placed on this node, and the key of the lock Citus
// takes on the metadata of a colocated shard group (the shard's index in
// its table's hash order, and the colocation group).
PreparedStatement placement_of(
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement p, pg_catalog.pg_dist_local_group g"
    "                WHERE p.shardid = j.shardid AND p.groupid = g.groupid) AS here,"
    "       (SELECT count(*) FROM pg_catalog.pg_dist_shard x WHERE x.logicalrelid = j.logicalrelid"
    "           AND x.shardminvalue::bigint < j.shardminvalue::bigint) AS shard_index,"
    "       jp.colocationid::bigint AS colocation"
    "  FROM pg_catalog.pg_dist_shard j JOIN pg_catalog.pg_dist_partition jp USING (logicalrelid)"
    " WHERE j.shardid = $1",
    {INT8OID});

PreparedStatement local_job_shard_ids(
    "SELECT s.shardid AS shard FROM pg_catalog.pg_dist_shard s"
    "  JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid"
    "  JOIN pg_catalog.pg_dist_local_group g ON g.groupid = p.groupid"
    " WHERE s.logicalrelid = 'wf.job'::regclass ORDER BY 1", {});

void drop_caches_if_stale() {
    // Never under a route that is in use (none nests today).
    if (cached_generation == generation || current != nullptr) return;
    std::vector<SPIPlanPtr> plans;
    for (auto& [shard, group] : groups)
        for (auto& entry : group->plans) plans.push_back(entry.second);
    groups.clear();
    shard_of_queue.clear();
    cached_generation = generation;
    for (SPIPlanPtr plan : plans) call([&] { SPI_freeplan(plan); });
}

// The group of wf.job's shard `job_shard` as Citus's metadata says now
// (cached until it changes); its names only if it is placed here.
ShardGroup* group_of(int64 job_shard) {
    auto found = groups.find(job_shard);
    if (found != groups.end()) return found->second.get();
    Params<1> params;
    params.set(0, Int64GetDatum(job_shard));
    Rows placement = placement_of.execute(params.values, params.nulls);
    if (placement.empty())
        throw core::Error("40001", "shard " + std::to_string(job_shard) + " of wf.job is gone",
                          "It was split or dropped meanwhile.", "Try the call again.");
    auto group = std::make_unique<ShardGroup>();
    group->job_shard = job_shard;
    group->local = placement.bool_at(0, "here");
    group->shard_index = placement.int64_at(0, "shard_index");
    group->colocation = placement.int64_at(0, "colocation");
    if (group->local) {
        Rows rows = group_names.execute(params.values, params.nulls);
        for (uint64 r = 0; r < rows.size(); r++) {
            group->names.push_back({rows.text_at(r, "table_name"), rows.text_at(r, "shard_name"),
                                    rows.bool_at(r, "replicated")});
            if (rows.text_at(r, "relname") == "ready")
                group->ready_suffix = "_" + std::to_string(rows.int64_at(r, "shard"));
            if (rows.text_at(r, "relname") == "job")
                group->job_suffix = "_" + std::to_string(rows.int64_at(r, "shard"));
            if (rows.text_at(r, "relname") == "claim")
                group->claim_suffix = "_" + std::to_string(rows.int64_at(r, "shard"));
            if (rows.text_at(r, "relname") == "remote_input") group->cross_group = true;
        }
        if (group->ready_suffix.empty() || group->claim_suffix.empty() || group->job_suffix.empty())
            throw core::Error("55000", "the shard group of wf.job's shard " + std::to_string(job_shard) +
                                           " has no shard of wf.job, wf.ready or wf.claim",
                              "pg_wf's tables are not all distributed.", "Run SELECT wf_distribute().");
    }
    ShardGroup* g = group.get();
    groups.emplace(job_shard, std::move(group));
    return g;
}

// Citus's lock on the metadata of a colocated shard group (its
// ADV_LOCKTAG_CLASS_CITUS_COLOCATED_SHARDS_METADATA advisory lock, class 8),
// in share mode, as its own writers take it: a shard move or split holds
// it exclusively while it ends, so a call either finishes before the move
// blocks writes or starts after the metadata says where the group is.
// Taking a lock processes the invalidations that came meanwhile.
LOCKTAG group_lock_tag(const ShardGroup* group) {
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(group->shard_index),
                         static_cast<uint32>(group->colocation), 8);
    return tag;
}

void lock_group_metadata(const ShardGroup* group) {
    LOCKTAG tag = group_lock_tag(group);
    call([&] {
        (void)LockAcquire(&tag, ShareLock, false, false);
        AcceptInvalidationMessages();
    });
}

// The group to route to, locked and current: resolves, locks, and looks
// again when Citus's metadata changed meanwhile.
ShardGroup* locked_group(const std::function<int64()>& job_shard) {
    for (int tries = 0; tries < 4; tries++) {
        drop_caches_if_stale();
        uint64 seen = generation;
        ShardGroup* group = group_of(job_shard());
        if (seen != generation) continue;  // changed while it was read
        lock_group_metadata(group);
        if (seen == generation) return group;
    }
    throw core::Error("40001", "Citus's metadata of pg_wf's tables kept changing",
                      "Shards were moved or split during the call.", "Try the call again.");
}

}  // namespace

bool distributed() {
    if (detected != Detected::unknown) return detected == Detected::distributed;
    register_callback();
    uint64 seen = generation;
    bool citus = call([] { return OidIsValid(get_extension_oid("citus", true)); });
    watched.clear();
    Oid job = wf_relation("job");
    bool is_distributed = false;
    if (citus)
        with_spi([&] {
            Rows tables = wf_tables.execute();
            for (uint64 r = 0; r < tables.size(); r++) {
                Oid relid = static_cast<Oid>(tables.int64_at(r, "relid"));
                watched.push_back(relid);
                if (relid == job && tables.bool_at(r, "distributed")) is_distributed = true;
            }
        });
    // Creating the distributed tables invalidates wf.job's entry too.
    if (OidIsValid(job) && std::find(watched.begin(), watched.end(), job) == watched.end())
        watched.push_back(job);
    // An invalidation read meanwhile may be of a change this read missed.
    detected = seen != generation ? Detected::unknown
               : is_distributed   ? Detected::distributed
                                  : Detected::single_server;
    return is_distributed;
}

ShardGroup* current_shard_group() { return current; }

bool routed_with_cross_group_dependencies() { return current != nullptr && current->cross_group; }

bool delegated_by_citus() {
    const char* name = call([] { return GetConfigOption("application_name", true, false); });
    return name != nullptr && strncmp(name, "citus_internal", 14) == 0;
}

void release_route_lock() {
    if (current == nullptr) return;
    LOCKTAG tag = group_lock_tag(current);
    call([&] {
        while (LockHeldByMe(&tag, ShareLock)) LockRelease(&tag, ShareLock, false);
    });
}

void retake_route_lock() {
    if (current == nullptr) return;
    uint64 seen = generation;
    lock_group_metadata(current);
    if (seen == generation && cached_generation == generation) return;
    // Citus's metadata changed meanwhile: is the group still placed here?
    Params<1> params;
    params.set(0, Int64GetDatum(current->job_shard));
    Rows placement = placement_of.execute(params.values, params.nulls);
    if (placement.empty() || !placement.bool_at(0, "here"))
        throw core::Error("40001", "the queue's shard moved to another node while the call waited",
                          {}, "Try the call again.");
}

PreparedStatement local_group_id(
    "SELECT groupid::bigint AS g FROM pg_catalog.pg_dist_local_group", {});

bool on_coordinator() { return local_group_id.execute().int64_at(0, "g") == 0; }

void require_coordinator(const char* what) {
    if (on_coordinator()) return;
    throw core::Error("0A000", std::string(what) + " must run on the Citus coordinator", {},
                      "Connect to the coordinator and call it there.");
}

void refuse_if_distributed() {
    if (!distributed()) return;
    // Every wf_* function serves a distributed pg_wf by its own path; this
    // guards the single-server frame (with_job_tables) against a new one.
    throw core::Error("0A000", "this pg_wf call is not supported on a distributed pg_wf",
                      "It reached code written for one server.", "README, \"Scaling out\".");
}

ShardRoute::ShardRoute(Datum queue) : saved_(current) {
    if (!distributed()) return;
    char* cstring = call([&] { return TextDatumGetCString(queue); });
    std::string name(cstring);
    call([&] { pfree(cstring); });
    ShardGroup* group = locked_group([&] {
        auto found = shard_of_queue.find(name);
        if (found != shard_of_queue.end()) return found->second;
        Params<1> params;
        params.set(0, queue);
        int64 shard = shard_for_queue.execute(params.values, params.nulls).int64_at(0, "shard");
        shard_of_queue.emplace(name, shard);
        return shard;
    });
    if (!group->local && delegated_by_citus())
        throw core::Error("40001", "queue \"" + name + "\" moved to another node",
                          "Citus sent the call here before the queue's shard moved.",
                          "Try the call again. A session that prepared the call with the queue "
                          "written as a literal keeps the old node in its plan: pass the queue as a "
                          "parameter, or DEALLOCATE the statement.");
    if (!group->local)
        throw core::Error(
            "0A000", "queue \"" + name + "\" is served by another node",
            "On a distributed pg_wf a call runs on the node that holds its queue's shard: "
            "Citus sends it there when it is a statement of its own with the queue as a "
            "constant or parameter, not when it is called from another function or inside "
            "a larger query.",
            "Call it as SELECT ... FROM wf_claim('queue', ...) on its own.");
    enter(group);
}

ShardRoute::ShardRoute(int64 job_shard) : saved_(current) {
    if (!distributed()) return;
    ShardGroup* group = locked_group([&] { return job_shard; });
    // Moved away since the worker listed it: its new node serves it.
    if (!group->local) {
        moved_ = true;
        return;
    }
    enter(group);
}

void ShardRoute::enter(ShardGroup* group) {
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
