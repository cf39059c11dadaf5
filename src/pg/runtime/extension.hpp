// The extension's own lifecycle: which versions of pg_wf's SQL objects this
// library serves, and what CREATE EXTENSION says about crash recovery.
#pragma once

#include "pg/base/postgres.hpp"

// The versions of the extension's SQL objects this library can serve. 1.12
// left the settings of its functions' statements to the library
// (base/statement_settings.hpp); 1.9
// added child workflows on a distributed pg_wf; 1.8
// added the calls a distributed pg_wf makes into one shard group; 1.7 made
// pg_wf distributable (Citus); 1.6
// added child workflows, versions, result waits, fan-out and progress; 1.5
// added the columns of flow control, which its statements name; 1.4 pinned
// every function's search_path and guards pg_wf's tables: an older
// schema is refused until ALTER EXTENSION pg_wf UPDATE, since its functions
// could be made to run planted code.
#define WF_OLDEST_SCHEMA_VERSION "1.6"
#define WF_SCHEMA_VERSION "1.12"

namespace wf::pg {

// Why pg_wf cannot run in this database, in words for a log line ("" when
// it can: created at a version this library serves, nothing attached to its
// tables, attachments.hpp). Read from the catalogs and cached per backend
// until a catalog change that could alter it.
std::string schema_refusal();

// The role pg_wf's SQL runs as: the owner of schema wf and of every table
// in it (wf_owner, a role that cannot log in; see run_as.hpp). Raises what
// require_current_schema raises.
Oid pg_wf_owner();

// Plain C (inside call()): the owner of schema wf, or InvalidOid; no check.
Oid schema_owner();

// The same as an error for SQL functions: 55000 with the hint to update
// (or to install the matching library). Until ALTER EXTENSION pg_wf UPDATE
// has run, every function refuses: a 1.1 claim is a job row that this
// library no longer reads.
void require_current_schema();

// Whether the installed SQL objects are at least `version` (a library
// serves older ones too, without what they lack); 55000 if not, for `what`.
bool schema_at_least(const char* version);
void require_schema_at_least(const char* version, const char* what);

}  // namespace wf::pg
