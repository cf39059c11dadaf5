-- pg_wf 1.3 -> 1.4: nothing pg_wf runs can be made to run someone else's
-- code. Every function resolves names in pg_catalog only (a function or
-- operator planted in another schema, say public, was what its SQL called),
-- and nothing may be attached to pg_wf's tables (an event trigger refuses
-- triggers, rules and row security there; what is attached anyway stops
-- pg_wf until it is removed). ALTER EXTENSION pg_wf UPDATE runs this on an
-- existing 1.3; a fresh CREATE EXTENSION runs pg_wf--1.4.sql.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

ALTER FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[]) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_enqueue_batch(text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_claim(text, text, int, interval, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_heartbeat(text, bigint, int, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_complete(text, bigint, int, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_complete_many(text, bigint[], int[], jsonb[]) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_fail(text, bigint, int, text, interval, boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_retry(text, bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_cancel(text, bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_sweep() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_recover_lost_claims() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_submit(jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_workflow(uuid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_cancel_workflow(uuid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_checkpoint(text, bigint, int, text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_snooze(text, bigint, int, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_await_event(text, bigint, int, text, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_signal(text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_schedule(text, text, text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_unschedule(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf._after_create() SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf._refuse_attachment() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'wf_refuse_attachment' LANGUAGE C
SET search_path = pg_catalog, pg_temp;
CREATE EVENT TRIGGER wf_guard ON ddl_command_start
    WHEN TAG IN ('CREATE TRIGGER', 'CREATE RULE', 'CREATE POLICY', 'ALTER POLICY', 'ALTER TABLE')
    EXECUTE FUNCTION wf._refuse_attachment();
