// See waiting.hpp.
#include "pg/api/waiting.hpp"

extern "C" {
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "tcop/pquery.h"
#include "utils/portal.h"
}

// From libpq/libpq.h (PostgreSQL 15), which cannot be included without the
// GSSAPI headers: the wait set of the client connection.
extern "C" PGDLLIMPORT WaitEventSet* FeBeWaitSet;
constexpr int FeBeWaitSetSocketPos = 0;
constexpr int FeBeWaitSetNEvents = 3;

namespace wf::pg {

// Plain C (inside call()): sleeps until the latch is set or `timeout_ms`
// passes, watching the client's socket too (the wait set of the client
// connection, as pq_check_connection does): a client that is gone
// (killed, its network lost) ends the wait and the session at once, as its
// next query would, instead of leaving a claimer that waits for nobody.
void wait_for_latch_or_lost_client(long timeout_ms) {
    if (FeBeWaitSet == nullptr) {  // not a client backend
        WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms,
                  PG_WAIT_EXTENSION);
        return;
    }
    ModifyWaitEvent(FeBeWaitSet, FeBeWaitSetSocketPos, WL_SOCKET_CLOSED, nullptr);
    WaitEvent events[FeBeWaitSetNEvents];
    int n = WaitEventSetWait(FeBeWaitSet, timeout_ms, events, FeBeWaitSetNEvents,
                             PG_WAIT_EXTENSION);
    for (int i = 0; i < n; i++) {
        if (events[i].events & WL_POSTMASTER_DEATH) proc_exit(1);
        if (events[i].events & WL_SOCKET_CLOSED) {
            // CHECK_FOR_INTERRUPTS ends the session (FATAL 08006).
            ClientConnectionLost = true;
            InterruptPending = true;
        }
    }
}

// Plain C (inside call()): whether this claim's wait may stop holding back
// vacuum. The statement that called wf_claim holds a snapshot for as long
// as it runs, and with it the session's xmin: a wait of minutes would keep
// every row that died meanwhile, in every table. The claim itself takes a
// new snapshot for each try, so the statement's snapshot matters only to
// what the statement reads after wf_claim returns. When that is nothing --
// `SELECT <columns> FROM wf_claim(...)` in READ COMMITTED, no other
// snapshot registered (no open cursor) -- the xmin is let go for the wait;
// the next try's snapshot sets it again. Any other shape keeps it.
bool statement_reads_nothing_else() {
    if (IsolationUsesXactSnapshot() || ActivePortal == nullptr) return false;
    if (list_length(ActivePortal->stmts) != 1) return false;
    PlannedStmt* stmt = linitial_node(PlannedStmt, ActivePortal->stmts);
    if (stmt->commandType != CMD_SELECT || stmt->subplans != NIL ||
        list_length(stmt->rtable) != 1 || stmt->planTree == nullptr ||
        !IsA(stmt->planTree, FunctionScan) || stmt->planTree->qual != NIL ||
        stmt->planTree->initPlan != NIL)
        return false;
    if (rt_fetch(1, stmt->rtable)->rtekind != RTE_FUNCTION) return false;
    ListCell* cell;
    foreach (cell, stmt->planTree->targetlist) {
        Expr* expr = lfirst_node(TargetEntry, cell)->expr;
        if (!IsA(expr, Var) && !IsA(expr, Const)) return false;
    }
    InvalidateCatalogSnapshot();
    return ThereAreNoPriorRegisteredSnapshots();
}

}  // namespace wf::pg
