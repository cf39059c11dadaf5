#include "pg/jobs/index_entries.hpp"

#include "pg/base/invalidation.hpp"
#include "pg/base/statement_settings.hpp"
#include "pg/jobs/direct_table.hpp"

extern "C" {
#include "access/genam.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
}

namespace wf::pg {

namespace {
struct KnownIndex {
    Oid oid;
    IndexInfo* info;  // its predicate compiled once (ii_PredicateState)
};
}  // namespace

// One table's indexes as the last call found them, in their own memory
// context (a child of CacheMemoryContext). An invalidation only marks them
// stale (it may come while a call reads them); the next call to open the
// table builds new ones and hands the stale context to the transaction, so
// that a call still reading it does so safely to its end.
struct IndexDefinitions {
    Oid table;
    bool stale;
    bool by_executor;  // an index these definitions do not cover
    int count;
    KnownIndex* indexes;
    MemoryContext context;
};

namespace {

constexpr int kKeptTables = 64;  // pg_wf's hot tables, or a node's shards of them
IndexDefinitions* kept[kKeptTables];
int next_to_replace = 0;

void on_relcache_invalidation(Datum, Oid relid) {
    for (IndexDefinitions* defs : kept) {
        if (defs == nullptr || defs->stale) continue;
        bool concerned = !OidIsValid(relid) || defs->table == relid;
        for (int i = 0; i < defs->count && !concerned; i++) concerned = defs->indexes[i].oid == relid;
        if (concerned) defs->stale = true;
    }
}

void retire(IndexDefinitions*& slot) {
    MemoryContextSetParent(slot->context, TopTransactionContext);
    slot = nullptr;
}

// Whether predicate `node` has a part that pg_wf's own predicates do not
// (they are columns, constants, built-in operators and functions, IS NULL,
// AND/OR/NOT): compiled once, a predicate then runs in every call, and
// nothing of a role's (a function written in SQL, a type's I/O) may be
// kept from one call to the next.
bool user_function(Oid function, void*) { return function >= FirstNormalObjectId; }
bool has_foreign_part(Node* node, void* context) {
    if (node == nullptr) return false;
    switch (nodeTag(node)) {
        case T_Var:
        case T_Const:
        case T_NullTest:
        case T_BoolExpr:
        case T_RelabelType:
        case T_List:
            break;
        case T_OpExpr:
        case T_FuncExpr:
        case T_ScalarArrayOpExpr:
            if (check_functions_in_node(node, user_function, nullptr)) return true;
            break;
        default:
            return true;
    }
    // PostgreSQL 15 declares the walker without its parameters.
    return expression_tree_walker(node, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(has_foreign_part)),
                                  context);
}

IndexDefinitions* build_definitions(Relation table) {
    // Built in a context of the call's, kept only when complete: an error
    // half way leaves nothing behind.
    MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "pg_wf index definitions",
                                                  ALLOCSET_SMALL_SIZES);
    MemoryContext caller = MemoryContextSwitchTo(context);
    List* oids = RelationGetIndexList(table);
    auto* defs = static_cast<IndexDefinitions*>(palloc0(sizeof(IndexDefinitions)));
    defs->table = RelationGetRelid(table);
    defs->context = context;
    defs->indexes = static_cast<KnownIndex*>(palloc0(sizeof(KnownIndex) * Max(list_length(oids), 1)));
    ListCell* cell;
    foreach (cell, oids) {
        Oid oid = lfirst_oid(cell);
        Relation index = index_open(oid, RowExclusiveLock);
        IndexInfo* info = BuildIndexInfo(index);
        bool plain = index->rd_rel->relam == BTREE_AM_OID && info->ii_Expressions == NIL &&
                     info->ii_ExclusionOps == nullptr &&
                     !has_foreign_part(reinterpret_cast<Node*>(info->ii_Predicate), nullptr);
        if (plain && info->ii_Predicate != NIL)
            info->ii_PredicateState =
                ExecInitQual(reinterpret_cast<List*>(expression_planner(reinterpret_cast<Expr*>(info->ii_Predicate))),
                             nullptr);
        defs->by_executor |= !plain;
        defs->indexes[defs->count++] = {oid, info};
        index_close(index, NoLock);  // kept locked to the transaction's end
    }
    MemoryContextSwitchTo(caller);
    MemoryContextSetParent(context, CacheMemoryContext);
    return defs;
}

// `table`'s index definitions, kept or built now. The table is open and
// locked: any change to its indexes that committed before has been heard.
const IndexDefinitions* index_definitions(Relation table) {
    static bool listening = false;
    if (!listening) {
        listen_to_relcache(on_relcache_invalidation);
        listening = true;
    }
    Oid relid = RelationGetRelid(table);
    IndexDefinitions** free_slot = nullptr;
    for (IndexDefinitions*& slot : kept) {
        if (slot != nullptr && slot->table == relid) {
            if (!slot->stale) return slot;
            retire(slot);
        }
        if (slot == nullptr && free_slot == nullptr) free_slot = &slot;
    }
    if (free_slot == nullptr) {
        free_slot = &kept[next_to_replace];
        next_to_replace = (next_to_replace + 1) % kKeptTables;
        retire(*free_slot);
    }
    *free_slot = build_definitions(table);
    return *free_slot;
}

}  // namespace

void IndexEntries::insert(Relation table, TupleTableSlot* slot, bool update, Snapshot snapshot,
                          CommandId command) {
    if (estate == nullptr) {
        estate = CreateExecutorState();
        estate->es_snapshot = snapshot;
        estate->es_output_cid = command;
        known = index_definitions(table);
        if (known->by_executor) {
            // An index added by hand may run a user's function (an
            // expression): with pg_wf's settings, as its statements.
            pin_statement_settings();
            RangeTblEntry* rte = makeNode(RangeTblEntry);
            rte->rtekind = RTE_RELATION;
            rte->relid = RelationGetRelid(table);
            rte->relkind = table->rd_rel->relkind;
            rte->rellockmode = RowExclusiveLock;
            ExecInitRangeTable(estate, list_make1(rte));
            relation = makeNode(ResultRelInfo);
            InitResultRelInfo(relation, table, 1, nullptr, 0);
            ExecOpenIndices(relation, false);
        } else {
            opened = static_cast<Relation*>(
                MemoryContextAllocZero(estate->es_query_cxt, sizeof(Relation) * Max(known->count, 1)));
        }
    }
    if (relation != nullptr) {
        if (relation->ri_NumIndices > 0) {
            List* recheck = ExecInsertIndexTuples(relation, slot, estate, update, /*noDupErr=*/false,
                                                  nullptr, NIL);
            // Empty: a deferred constraint comes with its trigger, which
            // open_hot_table refuses.
            list_free(recheck);
        }
    } else {
        // ExecInsertIndexTuples's loop, for the indexes it would take the
        // same path through.
        ExprContext* econtext = GetPerTupleExprContext(estate);
        econtext->ecxt_scantuple = slot;
        Datum values[INDEX_MAX_KEYS];
        bool isnull[INDEX_MAX_KEYS];
        for (int i = 0; i < known->count; i++) {
            const KnownIndex& index = known->indexes[i];
            if (!index.info->ii_ReadyForInserts) continue;
            if (index.info->ii_PredicateState != nullptr && !ExecQual(index.info->ii_PredicateState, econtext))
                continue;
            if (opened[i] == nullptr) opened[i] = index_open(index.oid, RowExclusiveLock);
            FormIndexDatum(index.info, slot, estate, values, isnull);
            // `update`: the executor's hint for a version whose indexed
            // columns did not change, as it judges it for a statement
            // that names none (index_unchanged_by_update).
            index_insert(opened[i], values, isnull, &slot->tts_tid, table,
                         index.info->ii_Unique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO, update, index.info);
        }
    }
    ResetPerTupleExprContext(estate);
}

void IndexEntries::close() {
    if (estate == nullptr) return;
    if (relation != nullptr) {
        ExecCloseIndices(relation);
    } else {
        for (int i = 0; i < known->count; i++)
            if (opened[i] != nullptr) index_close(opened[i], RowExclusiveLock);
    }
    FreeExecutorState(estate);
    init();
}

}  // namespace wf::pg
