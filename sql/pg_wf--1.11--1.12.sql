-- pg_wf 1.11 -> 1.12: the functions' definitions no longer SET
-- search_path, enable_seqscan and jit for every call.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- The library sets them itself when a function runs its first statement
-- (src/pg/base/statement_settings.hpp), in a GUC level of the function's
-- own, and restores them when it returns: a call that runs no statement
-- (a plain enqueue, claim or completion) no longer pays for three settings
-- made and undone, nor for the search path worked out again after each.
-- Every function of the extension is in C; only these three settings are
-- reset (one an administrator added stays). The library serves 1.11 too:
-- there the settings are already what it would set.
DO $$
DECLARE
    f pg_catalog.regprocedure;
BEGIN
    -- (Operators named in pg_catalog: none planted elsewhere is found.)
    FOR f IN SELECT p.oid::pg_catalog.regprocedure
               FROM pg_catalog.pg_proc p
               JOIN pg_catalog.pg_depend d
                 ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
                AND d.objid OPERATOR(pg_catalog.=) p.oid
                AND d.deptype OPERATOR(pg_catalog.=) 'e'::pg_catalog.char
               JOIN pg_catalog.pg_extension e
                 ON e.oid OPERATOR(pg_catalog.=) d.refobjid
                AND e.extname OPERATOR(pg_catalog.=) 'pg_wf'::pg_catalog.name
               JOIN pg_catalog.pg_language l
                 ON l.oid OPERATOR(pg_catalog.=) p.prolang
                AND l.lanname OPERATOR(pg_catalog.=) 'c'::pg_catalog.name
              WHERE p.proconfig IS NOT NULL
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s RESET search_path RESET enable_seqscan RESET jit', f);
    END LOOP;
END
$$;
