// Opening one of pg_wf's hot tables to write it without the executor
// (ready_set.cpp, claim_table.cpp), with the checks the executor makes for
// the same statement, so that skipping it loses nothing: a read-only
// transaction or a hot standby is refused (25006), the caller's table
// privileges are checked (42501), a publication's replica identity is
// honoured, and a table altered by hand gives an error (55000), never a
// misread datum. Plain C: everything here runs inside call().
#pragma once

#include "pg/base/postgres.hpp"
#include "pg/jobs/index_entries.hpp"

extern "C" {
#include "nodes/execnodes.h"
}

namespace wf::pg {

// A column as pg_wf's SQL script creates it.
struct ExpectedColumn {
    AttrNumber number;
    const char* name;
    Oid type;
};

// Raises 55000: `table` is not as this library expects (`what`).
[[noreturn]] void unexpected_table_shape(const char* table, const char* what);

// The writes a call makes to a table (a mask): each is checked as the
// executor checks a statement that makes it.
enum DirectWrites : int { kReadOnly = 0, kDelete = 1, kInsert = 2, kUpdate = 4 };

// Opens wf.<table><suffix> and its index wf.<index><suffix> (the suffix
// names a local shard on a distributed pg_wf; "" otherwise), after the
// executor's checks for `writes` (each needs its privilege, and SELECT
// always), with RowExclusiveLock (AccessShareLock to read only).
// `columns` must be there, named and typed so; the index must be a btree
// of the table whose leading keys are the first `index_keys` of them.
// `function` names the SQL function for the read-only refusal.
void open_hot_table(const char* function, const char* table, const char* index, const char* suffix,
                    int writes, const ExpectedColumn* columns, int ncolumns, int index_keys,
                    Relation* table_out, Relation* index_out);

// The OID of relation wf.<name> (InvalidOid if there is none), kept per
// backend until a relcache invalidation of it or a change to a schema.
Oid wf_relation_oid(const char* name);

// wf.job's and wf.claim's primary keys, job_pkey and claim_pkey: (id,
// queue) from schema 1.11, so that a descent compares bigints and reaches
// the queue's text only at the row it looks for; (queue, id) before, and on
// a distributed pg_wf created before 1.11 (an update leaves Citus's shards
// as they are). Both tables have queue as column 1 and id as column 2.
// Whether wf.<index><suffix> is the old key, led by the queue (false if
// there is no such index: the open that follows says so).
bool key_leads_with_queue(const char* index, const char* suffix);
// The key's columns led by the id, for open_hot_table.
extern const ExpectedColumn kIdQueueKey[2];
// The key's columns in the order of wf.<index><suffix> (either order), for
// open_hot_table.
const ExpectedColumn* job_key_columns(const char* index, const char* suffix);
// Scan keys for row (queue, id) of such an index, in its order.
void job_key_scan(Relation index, Datum queue, int64 id, ScanKeyData keys[2]);

// The start of a write made without the executor, as SPI starts each
// statement: a new command id, so that this transaction's own writes are
// seen, and (in READ COMMITTED) a new snapshot, so that every commit so far
// is. The snapshot is registered: UnregisterSnapshot it at the end.
void begin_direct_statement(Snapshot* snapshot, CommandId* command);

// The number of `table`'s column `name`, which must be of `type`: columns a
// schema update added come after the others in an updated table, so only
// the leading key columns are looked up by a fixed number.
AttrNumber column_number(Relation table, const char* name, Oid type);
// The same for a column a later schema version added: 0 when the table has
// none by that name (a database not yet updated).
AttrNumber column_number_if_any(Relation table, const char* name, Oid type);

// Whether text datum `value` (a status read from a row) is `expected`.
bool text_is(Datum value, const char* expected);

// Whether text datums `a` and `b` (queue names) are the same bytes: texteq
// under any deterministic collation, which a database's default always is.
bool same_text(Datum a, Datum b);

// Refuses (55000) a table with a column not in `names`: a row inserted by
// hand sets every column, and one it does not know would get no default.
void require_only_columns(Relation table, const char* const* names, int count);

// Refuses (23502, as the executor) a row of `table` formed by hand with a
// NULL where the column is NOT NULL (pg_wf's rows never are; a constraint
// added by hand may say otherwise).
void require_not_null(Relation table, const bool* nulls);

}  // namespace wf::pg
