// What a distributed pg_wf does across nodes (1.8): a signal wakes waiters
// in every shard group, a schedule's tick enqueues on the node of its
// queue, a sweep by hand reaches every group. Each is a statement Citus
// plans and sends (a write of a reference table, a read over every shard),
// or a call of one of pg_wf's own group functions (wf._wake_event,
// wf._fire_tick, wf._sweep_group: group_calls.cpp), which Citus sends to
// the node holding the group's shard -- in the caller's transaction, so
// that it commits (two-phase when it spans nodes) or rolls back with it.
//
// Hot-path calls never come here: they are delegated to their queue's
// node and run on its shards alone (shard_route.hpp).
//
// Who makes them: the bootstrap superuser, the role Citus itself connects
// between nodes as. pg_wf's owner cannot log in, so Citus cannot open a
// connection as it, and the caller may not be allowed to write pg_wf's
// tables. Only pg_wf's own text runs so: names qualified with wf. or
// pg_catalog., values as quoted literals, under the search_path of pg_wf's
// functions (pg_catalog, pg_temp); nothing is attached to pg_wf's tables
// (attachments.hpp); the group functions refuse any caller but a superuser.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pg/base/spi.hpp"

namespace wf::pg {

// A SQL literal: 'text' with quotes doubled (quote_literal).
std::string sql_literal(std::string_view value);
// A literal of a jsonb or timestamptz Datum, with its cast; "NULL" for none.
std::string jsonb_literal(std::optional<Datum> value);
std::string timestamptz_literal(std::optional<Datum> value);

// Runs `sql` (pg_wf's own text, literals in it) through Citus as the
// bootstrap superuser, multi-shard statements on one connection per node
// (so that the calls after them may share those connections). Inside SPI.
Rows run_through_citus(const std::string& sql);

// One queue of each shard group that the statements (through Citus, each
// returning a column `queue`) name: the key a group call is addressed by.
std::vector<std::string> one_queue_per_group(const std::vector<std::string>& queries);

// Calls wf.<function>(queue, more...) -- `arguments` are the literals after
// the queue -- on the node holding the queue's shard group; returns its
// bigint/int result (0 for NULL).
int64 call_in_group(const char* function, const std::string& queue, const std::string& arguments);
// The same for a function of any other result type, as text ("" for NULL).
std::string call_in_group_text(const char* function, const std::string& queue,
                               const std::string& arguments);

// The qualified name of pg_wf's SQL function `name` (one of its API, in
// the schema the extension was created in).
std::string api_function(const char* name);

// A bigint[] literal of `ids`.
std::string int8_array_literal(const std::vector<int64>& ids);

// Refuses (42501) a caller of a group function who is not a superuser:
// only pg_wf calls them (through call_in_group).
void require_group_call_from_pg_wf(const char* function);

// While it lives, a lock wait in this backend ends after a second (55P03).
// For the group functions a node's worker calls (the relay, cron): a
// worker's transaction spans nodes, and Citus's detection of distributed
// deadlocks does not see a background worker's, so a wait it closes a
// cycle with -- a user's cancel holding a parent here and waiting for the
// worker's lock on a child elsewhere -- would last forever. The worker's
// transaction fails instead, and its next pass tries again.
class BoundedLockWaits {
public:
    BoundedLockWaits();
    ~BoundedLockWaits();
    BoundedLockWaits(const BoundedLockWaits&) = delete;
    BoundedLockWaits& operator=(const BoundedLockWaits&) = delete;

private:
    int nest_level_ = 0;
    int exceptions_;
};

}  // namespace wf::pg
