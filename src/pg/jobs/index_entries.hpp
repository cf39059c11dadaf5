// The index entries of rows that pg_wf writes without the executor
// (job_inserts.cpp, claim_table.cpp, job_table.cpp), made as the executor's
// ExecInsertIndexTuples makes them: every index of the table, partial ones
// only for rows their predicate admits, unique ones checked.
//
// What the executor rebuilds for each statement (each index's IndexInfo,
// its predicate compiled, every index opened and locked) is kept per
// backend instead, per table, until a relcache invalidation of the table or
// of one of its indexes says it changed: a single enqueue wrote ~7 index
// definitions' worth of set-up for its 2 index entries. A table whose
// indexes are not all plain btrees on columns, with predicates of built-in
// functions only (an index added by hand), keeps the executor's own index
// maintenance, built for each call as before.
#pragma once

#include "pg/base/postgres.hpp"

extern "C" {
#include "nodes/execnodes.h"
}

namespace wf::pg {

struct IndexDefinitions;  // of one table, kept across calls (index_entries.cpp)

// Plain C: every member runs inside call().
struct IndexEntries {
    EState* estate;
    const IndexDefinitions* known;  // the kept definitions, or
    ResultRelInfo* relation;        // the executor's, for a table they do not cover
    Relation* opened;               // known's indexes, each opened when first written

    void init() { estate = nullptr, known = nullptr, relation = nullptr, opened = nullptr; }
    // Entries for the row in `slot`, just written to `table` as a new row,
    // or (`update`) as a new version that is not HOT.
    void insert(Relation table, TupleTableSlot* slot, bool update, Snapshot snapshot, CommandId command);
    void close();
};

}  // namespace wf::pg
