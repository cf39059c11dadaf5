// On a distributed pg_wf (Citus), a call runs on the node that holds its
// queue's shard, and its SQL names that node's shards directly (wf.job_102008
// rather than wf.job): PostgreSQL's own planner then plans it, as on one
// server, instead of Citus planning a distributed query per statement (which
// refuses generic plans, and costs a round trip per shard). This rewrites a
// statement's table names for one shard group.
//
// Pure C++ (no PostgreSQL): src/pg/citus/shard_route.cpp resolves the names,
// src/pg/base/spi.cpp prepares one plan per shard group.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace wf::core {

struct ShardName {
    std::string table;   // as written in pg_wf's SQL, schema-qualified: "wf.job"
    std::string shard;   // the local relation to use instead: "wf.job_102008"
    bool replicated;     // a reference table: its local copy may be read, never written
};

struct RoutedSql {
    std::string sql;
    // A replicated table the statement writes (INSERT INTO, UPDATE, DELETE
    // FROM), or empty: through a local copy, that would change one node's
    // copy only.
    std::string writes_replicated;
};

// Replaces every occurrence of a table's name (followed by a character that
// cannot continue an identifier, so wf.job never matches wf.jobs or
// wf.job_id_seq) by its shard's name. Text inside '...' literals is left
// alone.
RoutedSql route_sql(std::string_view sql, const std::vector<ShardName>& names);

}  // namespace wf::core
