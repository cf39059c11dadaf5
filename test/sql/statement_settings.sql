-- The settings pg_wf's statements run with (search_path = pg_catalog,
-- pg_temp; enable_seqscan and jit off) are the library's to set, for a
-- function's statements only (src/pg/base/statement_settings.hpp): the
-- functions' definitions set nothing since 1.12, and the caller's session
-- gets its own settings back when a function returns or fails.
SELECT count(*) AS functions_that_set_anything
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_wf')
   AND p.proconfig IS NOT NULL;

SET search_path = public, pg_catalog;
SET enable_seqscan = on;
SET jit = on;

-- What a statement of pg_wf's sees: an index added by hand to wf.job,
-- whose function says the settings it runs under. An enqueue with an
-- idempotency key inserts with a statement (INSERT ... ON CONFLICT); a
-- plain enqueue writes its row without one, but the index's expression is
-- a user's code, so it runs under pg_wf's settings too.
CREATE FUNCTION settings_seen(jsonb) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RAISE NOTICE 'search_path %, enable_seqscan %, jit %', current_setting('search_path'),
    current_setting('enable_seqscan'), current_setting('jit');
  RETURN '';
END $$;
CREATE INDEX settings_probe ON wf.job (public.settings_seen(payload)) WHERE queue = 'ss_probe';
SELECT wf_enqueue('ss_probe', '{}', idempotency_key => 'once') > 0 AS by_statement;
SELECT wf_enqueue('ss_probe', '{}') > 0 AS without_statement;
DROP INDEX wf.settings_probe;
SHOW search_path;
SHOW enable_seqscan;
SHOW jit;

-- A call that ran statements and failed, in a savepoint: the session's own
-- settings, after the rollback to it and after the transaction.
BEGIN;
SAVEPOINT before_call;
SELECT wf_enqueue('ss', '{}', depends_on => ARRAY[9000000000000]);
ROLLBACK TO SAVEPOINT before_call;
SHOW search_path;
SELECT wf_enqueue('ss', '{}', idempotency_key => 'k') > 0 AS enqueued_after;
SHOW enable_seqscan;
COMMIT;
SHOW search_path;
SHOW jit;

-- Two functions in one statement, the second once per row of the first:
-- each call has a scope of its own.
SELECT count(wf_enqueue('ss', '{}', depends_on => ARRAY[c.id])) AS children_of_claimed
  FROM wf_claim('ss', max_jobs => 5) c;
SHOW search_path;
SHOW enable_seqscan;

-- A caller's query compiled by JIT calls pg_wf's functions (the view's
-- wf._visible, once per row) without inlining them: the library installs
-- no bitcode (the Makefile says why), and the backend lives on.
SET jit_above_cost = 0;
SET jit_inline_above_cost = 0;
SET jit_optimize_above_cost = 0;
SELECT count(*) AS counted_under_jit FROM wf.jobs WHERE queue = 'ss';
RESET jit_above_cost;
RESET jit_inline_above_cost;
RESET jit_optimize_above_cost;

RESET search_path;
RESET enable_seqscan;
RESET jit;
DROP FUNCTION settings_seen(jsonb);
