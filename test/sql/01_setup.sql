-- Creating the extension, and what the other files of this suite share.
-- Every later file works on queues of its own, so the files do not depend on
-- each other's jobs (only on the helpers defined here).

-- pg_wf is in shared_preload_libraries (test/pg_wf.conf): no NOTICE about
-- crash recovery being manual.
CREATE EXTENSION pg_wf;

SELECT extname, extversion, n.nspname AS schema, extrelocatable
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE extname = 'pg_wf';

-- The SQL API: argument names and defaults are part of the contract (callers
-- use named notation). None is STRICT: a NULL argument is an error, never a
-- silent NULL result.
SELECT p.proname, a.n, a.argument
  FROM pg_proc p
  JOIN pg_namespace ns ON ns.oid = p.pronamespace,
       regexp_split_to_table(pg_get_function_arguments(p.oid), ', ') WITH ORDINALITY AS a(argument, n)
 WHERE ns.nspname = 'public' AND p.proname LIKE 'wf\_%' AND a.argument <> ''
 ORDER BY p.proname, a.n;
SELECT p.proname, pg_get_function_result(p.oid) AS result, p.proisstrict AS strict,
       l.lanname AS language, p.provolatile AS volatility
  FROM pg_proc p
  JOIN pg_namespace ns ON ns.oid = p.pronamespace
  JOIN pg_language l ON l.oid = p.prolang
 WHERE ns.nspname = 'public' AND p.proname LIKE 'wf\_%' AND p.proname <> 'wf_claim'
 ORDER BY p.proname;
-- wf_claim's result columns.
SELECT a.n, a.col
  FROM regexp_split_to_table(pg_get_function_result('wf_claim'::regproc), ', ')
       WITH ORDINALITY AS a(col, n)
 ORDER BY a.n;

-- The views users read.
SELECT table_name FROM information_schema.views
 WHERE table_schema = 'wf' ORDER BY table_name;

-- try_sql(sql): runs one statement and returns 'ok', or the SQLSTATE and the
-- primary message of the error it raised (the statement is rolled back).
-- with_detail adds errdetail and errhint.
CREATE FUNCTION try_sql(sql text, with_detail boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    state text;
    message text;
    detail text;
    hint text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    IF with_detail THEN
        RETURN state || ': ' || message
               || CASE WHEN detail <> '' THEN E'\nDETAIL: ' || detail ELSE '' END
               || CASE WHEN hint <> '' THEN E'\nHINT: ' || hint ELSE '' END;
    END IF;
    RETURN state || ': ' || message;
END
$$;

SELECT try_sql('SELECT 1');
SELECT try_sql('SELECT 1/0');
