// The settings every statement a pg_wf SQL function runs is planned and run
// with, whatever the caller's session says:
// - search_path = pg_catalog, pg_temp: names in pg_wf's SQL resolve in
//   pg_catalog and nowhere else, so a function, operator or cast planted in
//   another schema (the database owner owns public) is never what its
//   statements call; every table and sequence they name is qualified;
// - jit = off: a plan that still has a sequential scan under the setting
//   below costs over 1e10, far above jit_above_cost, and would be compiled
//   on every call;
// - enable_seqscan = off, for the functions on the hot paths: the tables
//   behind a claim churn, and a small table with many dead pages makes the
//   planner prefer a sequential scan over its index by far; every statement
//   is meant to go through an index. Those off the hot paths
//   (WF_SQL_FUNCTION_ANY_SCAN: configuration, grants, schedules, metrics,
//   the views' filters) keep the planner's choice.
//
// They are set when a function is about to run its first statement, or
// anything of a user's (an index expression added by hand), in a GUC level
// of the function's own, and restored when it returns (by the
// (sub)transaction's abort when it fails): a call that runs no statement,
// as a plain enqueue, claim or completion, pays nothing for them. Until
// schema 1.12 the SET clause of each function's definition set them for
// every call. Code without SQL resolves no name through the search_path: it
// opens pg_wf's tables by schema and name (direct_table).
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// Plain C: before a statement is prepared or run (base/spi.cpp, and the
// few callers of SPI_execute), or user code (an index expression) runs.
// Outside a pg_wf SQL function (the background worker, which pins its
// session's settings) nothing is done. Code that opens a GUC level of its
// own calls it first (cluster_calls.cpp), so that the function's level is
// the outer one: the end of a level also ends every level opened after it.
// A subtransaction needs nothing: one begun before the pin ends it, and
// the next statement pins again (a claim that waits under max_running).
void pin_statement_settings();

// For run_sql_function (guard.cpp) only: the scope of one SQL function's
// settings. `enter` returns what `leave` restores; `leave` (plain C) puts
// the caller's settings back if the function pinned them and returned.
struct StatementSettingsScope {
    int level;
    SubTransactionId pinned_in;
    bool index_scans_only;
};
StatementSettingsScope enter_statement_settings(bool index_scans_only);
void leave_statement_settings(const StatementSettingsScope& outer, bool returned);

}  // namespace wf::pg
