-- pg_wf 1.9 -> 1.10: the ready set's key order holds only the rows of
-- queues that claim key by key.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- 1.10: a ready row says whether it is in ready_key_order; every row there
-- today is, and so is one written without saying (the SQL paths): only an
-- enqueue into a queue that does not claim key by key leaves it out. And a
-- queue that began to claim key by key is marked until the worker has put
-- in the key order the ready rows that transactions overlapping the change
-- wrote outside it (src/pg/jobs/key_order.hpp).
--
-- A distributed pg_wf keeps its 1.9 tables as they are: every ready row of
-- it stays in the key order (its nodes' workers do not sweep), and Citus
-- does not carry a change made here to the shards of a distributed table.
DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        -- (Operators named in pg_catalog: none planted elsewhere is found.)
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                    WHERE logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=)
                          'wf.ready'::pg_catalog.regclass::pg_catalog.oid) THEN
            RETURN;
        END IF;
    END IF;
    ALTER TABLE wf.ready ADD COLUMN key_order boolean NOT NULL DEFAULT true;
    DROP INDEX wf.ready_key_order;
    CREATE INDEX ready_key_order ON wf.ready (queue, key, priority DESC, run_at, id)
        WHERE key_order;
    ALTER TABLE wf.queue_config ADD COLUMN key_order_sweep boolean NOT NULL DEFAULT false;
END
$$;
