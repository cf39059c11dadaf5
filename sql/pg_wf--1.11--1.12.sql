-- pg_wf 1.11 -> 1.12: the functions' definitions no longer SET
-- search_path, enable_seqscan and jit for every call.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- The library sets them itself when a function runs its first statement
-- (src/pg/base/statement_settings.hpp), in a GUC level of the function's
-- own, and restores them when it returns: a call that runs no statement
-- (a plain enqueue, claim or completion) no longer pays for three settings
-- made and undone, nor for the search path worked out again after each.
-- Every function of the extension is in C; each is named here as 1.11
-- declares it. The library serves 1.11 too: there the settings are
-- already what it would set.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure
               FROM pg_catalog.pg_proc p
               JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass
                                          AND d.objid = p.oid AND d.deptype = 'e'
               JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_wf'
              WHERE p.prolang = (SELECT oid FROM pg_catalog.pg_language WHERE lanname = 'c')
                AND p.proconfig IS NOT NULL
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s RESET ALL', f);
    END LOOP;
END
$$;
