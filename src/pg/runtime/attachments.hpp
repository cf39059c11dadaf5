// Nothing attaches to pg_wf's tables: no trigger, rule or row security
// policy. pg_wf's functions and its worker write these tables with pg_wf's
// rights; code attached to them would run with those rights. An event
// trigger refuses to attach anything (wf_refuse_attachment), and what is
// there anyway (attached before, or by a superuser who disabled the event
// trigger) stops every function and the worker until it is removed.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// Plain C (run inside call()): the first thing attached to a table in
// schema wf, described ("trigger t on wf.job"), or nullptr if none. Reads
// the catalogs: callers cache the answer until a relcache invalidation of
// one of the schema's relations, which it lists in `relations` (up to
// `capacity`; *count is -1 when they are more).
const char* find_attachment(Oid* relations, int capacity, int* count);

}  // namespace wf::pg
