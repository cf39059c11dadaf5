-- A database where pg_wf's background worker runs can still be dropped:
-- the worker must not hold DROP DATABASE off ("database is being accessed
-- by other users").
CREATE DATABASE wf_drop_test;
\c wf_drop_test
CREATE EXTENSION pg_wf;
SELECT wf_enqueue('drop_q') IS NOT NULL AS enqueued;
-- Give the worker time to connect to the new database (up to 5 s, quietly).
DO $$
BEGIN
    FOR i IN 1..100 LOOP
        EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
                           WHERE datname = 'wf_drop_test' AND backend_type <> 'client backend');
        PERFORM pg_sleep(0.05);
        PERFORM pg_stat_clear_snapshot();
    END LOOP;
END
$$;
\c contrib_regression
DROP DATABASE wf_drop_test;
SELECT count(*) AS left_over FROM pg_database WHERE datname = 'wf_drop_test';
-- (Clean-up in case the DROP above failed.)
SET client_min_messages = warning;
DROP DATABASE IF EXISTS wf_drop_test WITH (FORCE);
RESET client_min_messages;
