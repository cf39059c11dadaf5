-- pg_wf 1.10 -> 1.11: wf.job's and wf.claim's primary keys are led by the
-- id, and wf.job's index on the id alone (job_id) goes.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- 1.11: (id, queue), not (queue, id). Ids come from one sequence, so a
-- lookup or an insert in these keys compares bigints and reaches the
-- queue's text only at its own row; and job_pkey now serves the lookups by
-- id that job_id served, so an enqueue writes one index entry less. Both
-- keys are rebuilt here (each table is locked while its key is built).
--
-- A distributed pg_wf keeps its keys as they are: Citus does not carry a
-- change made here to the shards of a distributed table. The library reads
-- either order (src/pg/jobs/direct_table.hpp).
DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        -- (Operators named in pg_catalog: none planted elsewhere is found.)
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                    WHERE logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=)
                          'wf.job'::pg_catalog.regclass::pg_catalog.oid) THEN
            RETURN;
        END IF;
    END IF;
    ALTER TABLE wf.job DROP CONSTRAINT job_pkey;
    ALTER TABLE wf.job ADD CONSTRAINT job_pkey PRIMARY KEY (id, queue);
    DROP INDEX wf.job_id;
    ALTER TABLE wf.claim DROP CONSTRAINT claim_pkey;
    ALTER TABLE wf.claim ADD CONSTRAINT claim_pkey PRIMARY KEY (id, queue);
END
$$;
