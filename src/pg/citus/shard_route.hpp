// pg_wf on Citus: which node serves a queue, and the names its SQL uses
// there. Citus is found through the catalogs (no Citus header or library
// is needed to build or run pg_wf without it).
//
// After wf_distribute() (distribute.cpp), every table that holds one
// queue's rows is distributed by queue, all of them colocated, so a queue
// lives in one shard group on one node; the rest are reference tables
// (a copy on every node). A call for a queue is delegated by Citus to
// that node (create_distributed_function), and there a ShardRoute makes
// every statement of the call name the group's shards (wf.job_102008) and
// the local copies of the reference tables: PostgreSQL plans them as on one
// server, and the call never leaves the node.
#pragma once

#include <unordered_map>

#include "pg/base/spi.hpp"

namespace wf::pg {

// Whether pg_wf's tables are distributed by Citus in this database.
// Cached per backend; Citus's metadata changes invalidate it.
bool distributed();

// One shard group on this node: the names its statements use, and their
// plans (one per PreparedStatement, kept for the backend's life).
struct ShardGroup : SqlRoute {
    int64 job_shard = 0;
    bool local = false;        // placed on this node (only then are names filled)
    int64 shard_index = 0;     // Citus's lock on the group's metadata: its index
    int64 colocation = 0;      // and colocation group
    std::string ready_suffix;  // "_102040": wf.ready's shard and its indexes' names end so
    std::string claim_suffix;  // the same for wf.claim
    std::string job_suffix;    // and for wf.job
    // Its tables of dependencies between groups (1.8: wf.remote_input and
    // wf.remote_dependent) are distributed: a 1.7 schema, or one updated
    // but not distributed again, has none, and such a group serves the
    // dependencies inside it only.
    bool cross_group = false;
};

// Whether the current statements are routed to a group that serves
// dependencies between groups (remote_dependencies.hpp).
bool routed_with_cross_group_dependencies();

// While one exists, pg_wf's statements name the local shards of one group.
// Constructed inside SPI (frame.hpp); a no-op where pg_wf is not
// distributed. A queue served by another node is refused (0A000); a queue
// whose shard is being moved waits for the move, then is refused (40001)
// if the move took it away.
class ShardRoute {
public:
    explicit ShardRoute(Datum queue);
    // The worker: one group it found placed here. moved(): it is not any
    // more (and nothing is routed).
    explicit ShardRoute(int64 job_shard);
    bool moved() const { return moved_; }
    ~ShardRoute();
    ShardRoute(const ShardRoute&) = delete;
    ShardRoute& operator=(const ShardRoute&) = delete;

private:
    void enter(ShardGroup* group);
    ShardGroup* saved_;
    bool moved_ = false;
};

// What is not one queue's (workflows, events, schedules, grants, a sweep by
// hand) is not served yet on a distributed pg_wf: refused (0A000) rather
// than run as distributed queries Citus would plan one by one.
void refuse_if_distributed();

// Refuses (0A000) unless this is the Citus coordinator (where wf_distribute
// runs, and whose role OIDs the grants record). Inside SPI, Citus present.
void require_coordinator(const char* what);
bool on_coordinator();

// The group the current statements are routed to, or nullptr.
ShardGroup* current_shard_group();

// Whether this backend serves a Citus connection (a call Citus delegated
// here, a query on a shard): Citus names those "citus_internal gpid=...".
bool delegated_by_citus();

// A call that waits long (a claim with `wait`) lets go of Citus's lock on
// the group's metadata while it sleeps, so that a shard move waits for no
// sleeper, and takes it again after (40001 if the group moved meanwhile).
void release_route_lock();
void retake_route_lock();

// The shards of wf.job placed on this node (the worker serves each).
std::vector<int64> local_job_shards();

}  // namespace wf::pg
