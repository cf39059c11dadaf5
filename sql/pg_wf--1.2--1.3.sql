-- pg_wf 1.2 -> 1.3: wf.job.owner_pid goes. Since 1.2 the pid of a running
-- attempt's owner lives in its claim row (wf.claim.owner_pid, which wf.jobs
-- shows); the 1.2 library never wrote or read the job row's column. Nothing
-- else changes. ALTER EXTENSION pg_wf UPDATE runs this on an existing 1.2;
-- a fresh CREATE EXTENSION runs pg_wf--1.3.sql (built from pg_wf.sql).
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

ALTER TABLE wf.job DROP COLUMN owner_pid;
