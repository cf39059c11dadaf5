-- The functions are the only door: per-queue rights (wf_grant), checked in
-- every function, each refusal a 42501 that changes nothing; no role needs
-- or gets a privilege on pg_wf's tables; the views show a role its queues.
-- Queues of this file: acme.*, globex.*.

CREATE ROLE sec_admin;
CREATE ROLE sec_producer;
CREATE ROLE sec_worker;
CREATE ROLE sec_other;
CREATE ROLE sec_pool;            -- a role whose members work for acme
GRANT sec_pool TO sec_other;
-- pg_wf's tables belong to wf_owner, which cannot log in; nobody else
-- holds a privilege on them.
SELECT rolcanlogin, rolsuper FROM pg_roles WHERE rolname = 'wf_owner';
SELECT count(*) AS table_grants FROM information_schema.role_table_grants
 WHERE table_schema = 'wf' AND grantee NOT IN ('wf_owner', 'PUBLIC')
   AND table_name NOT IN ('jobs', 'job_states', 'queue_stats', 'workflows', 'schedules', 'grants');
SELECT has_function_privilege('sec_worker', 'wf_claim(text,text,int,interval,interval,text[])', 'EXECUTE')
       AS worker_may_execute_before;

-- A superuser makes sec_admin the administrator of acme's queues; it
-- grants the rest, but nothing outside them.
SELECT wf_grant('sec_admin', 'administer', 'acme.*');
SET ROLE sec_admin;
SELECT wf_grant('sec_producer', 'produce', 'acme.*');
SELECT wf_grant('sec_worker', 'work', 'acme.*');
SELECT wf_grant('sec_worker', 'signal', 'acme.*');
SELECT wf_grant('sec_pool', 'work', 'acme.pool');
SELECT wf_grant('sec_worker', 'work', 'acme.*') AS granted_twice;
SELECT try_sql($$SELECT wf_grant('sec_other', 'work', 'globex.*')$$) AS outside_its_queues;
SELECT try_sql($$SELECT wf_grant('sec_other', 'work', '*')$$) AS every_queue;
SELECT try_sql($$SELECT wf_grant('sec_other', 'rule', 'acme.x')$$) AS bad_capability;
SELECT grantee, capability, queues, granted_by FROM wf.grants ORDER BY 1, 2, 3;
RESET ROLE;
SELECT has_function_privilege('sec_worker', 'wf_claim(text,text,int,interval,interval,text[])', 'EXECUTE')
       AS worker_may_execute,
       has_function_privilege('sec_worker', 'wf_enqueue(text,jsonb,timestamptz,int,int,text,uuid,text,bigint[],text,text,text,interval,timestamptz,text)', 'EXECUTE')
       AS worker_may_enqueue;

-- Another tenant's job, and one of acme's.
SELECT wf_enqueue('globex.mail', '{"secret": "globex"}') AS globex \gset
SELECT wf_configure_queue('globex.mail', max_attempts => 3);

-- The producer enqueues in acme's queues only, and sees only them.
SET ROLE sec_producer;
SELECT wf_enqueue('acme.mail', '{"to": "ada"}') AS acme \gset
SELECT try_sql($$SELECT wf_enqueue('globex.mail', '{}')$$, with_detail => true) AS other_queue;
SELECT try_sql($$SELECT wf_enqueue_batch('globex.mail', '[{}]')$$) AS other_batch;
SELECT try_sql('SELECT wf_enqueue(''acme.mail'', ''{}'', depends_on => ARRAY[' || :globex || '])')
       AS depends_on_other_tenant;
SELECT try_sql($$SELECT wf_submit('{"steps": [{"name": "a", "queue": "acme.flow"},
                                              {"name": "b", "queue": "globex.flow", "after": ["a"]}]}')$$)
       AS workflow_across_tenants;
SELECT try_sql($$SELECT * FROM wf_claim('acme.mail')$$) AS claim;
SELECT queue, status FROM wf.jobs ORDER BY id;
SELECT queue, pending FROM wf.queue_stats ORDER BY queue;
RESET ROLE;

-- The worker works acme's queues; it cannot touch globex's job, nor the
-- tables behind the functions.
SET ROLE sec_worker;
SELECT id = :acme AS claimed_acme, attempt FROM wf_claim('acme.mail');
SELECT try_sql($$SELECT * FROM wf_claim('globex.mail')$$) AS other_claim;
SELECT try_sql('SELECT wf_complete(''globex.mail'', ' || :globex || ', 1, ''{}'')') AS forged_complete;
SELECT try_sql('SELECT wf_fail(''globex.mail'', ' || :globex || ', 1, ''x'', permanent => true)') AS forged_fail;
SELECT try_sql('SELECT wf_heartbeat(''globex.mail'', ' || :globex || ', 1, ''1 second'')') AS forged_heartbeat;
SELECT try_sql('SELECT wf_cancel(''globex.mail'', ' || :globex || ')') AS cancel;
SELECT try_sql($$SELECT * FROM wf.job$$) AS read_table;
SELECT try_sql($$DELETE FROM wf.ready$$) AS strand_jobs;
SELECT try_sql($$UPDATE wf.queue_config SET paused = true$$) AS pause_queues;
SELECT try_sql($$UPDATE wf.claim SET lease_expires_at = now()$$) AS expire_leases;
SELECT try_sql($$INSERT INTO wf.job (queue, status, payload) VALUES ('globex.mail', 'done', '{}')$$)
       AS insert_job;
SELECT try_sql($$SELECT wf_configure_queue('acme.mail', paused => true)$$) AS configure;
SELECT try_sql($$SELECT wf_schedule('sec_tick', '* * * * *', 'acme.mail')$$) AS schedule;
SELECT try_sql($$SELECT wf_sweep()$$) AS sweep;
SELECT wf_complete('acme.mail', :acme, 1, '{"sent": true}') AS completed;
-- Events are scoped like queues: acme's approvals, not globex's.
SELECT wf_signal('acme.approval:1', '{"ok": true}') AS woken;
SELECT try_sql($$SELECT wf_signal('globex.approval:1', '{"ok": true}')$$, with_detail => true)
       AS other_event;
SELECT queue, status FROM wf.jobs ORDER BY id;
RESET ROLE;

-- A member of a role holds its rights.
SELECT wf_enqueue('acme.pool', '{}') IS NOT NULL AS enqueued;
SET ROLE sec_other;
SELECT count(*) AS claimed_as_member FROM wf_claim('acme.pool');
SELECT try_sql($$SELECT * FROM wf_claim('acme.mail')$$) AS not_granted_queue;
RESET ROLE;

-- Nothing of globex changed.
SELECT status, attempt, payload FROM wf.jobs WHERE id = :globex;
SELECT paused FROM wf.queue_config WHERE queue = 'acme.mail';
SELECT count(*) AS events FROM wf.event WHERE name LIKE 'globex%';

-- Operate and administer are checked per queue too: holding them on acme's
-- queues opens the functions, not globex's jobs or settings.
SET ROLE sec_admin;
SELECT wf_grant('sec_producer', 'operate', 'acme.*');
RESET ROLE;
SET ROLE sec_producer;
SELECT try_sql('SELECT wf_cancel(''globex.mail'', ' || :globex || ')') AS cancel_other;
SELECT try_sql('SELECT wf_retry(''globex.mail'', ' || :globex || ')') AS retry_other;
SELECT wf_cancel('acme.mail', :acme) AS cancel_own_done_job;
RESET ROLE;
SET ROLE sec_admin;
SELECT try_sql($$SELECT wf_configure_queue('globex.mail', paused => true)$$) AS configure_other;
SELECT try_sql($$SELECT wf_schedule('sec_tick', '0 0 * * *', 'globex.mail')$$) AS schedule_other;
SELECT try_sql($$SELECT wf_sweep()$$) AS sweep_without_star;
SELECT try_sql($$SELECT wf_recover_lost_claims()$$) AS recover_without_star;
SELECT wf_configure_queue('acme.mail', max_attempts => 4);
SELECT wf_schedule('sec_tick', '0 0 * * *', 'acme.cron') IS NOT NULL AS scheduled;
SELECT name, queue FROM wf.schedules;
SELECT wf_unschedule('sec_tick') AS unscheduled;
SELECT wf_revoke('sec_producer', 'operate', 'acme.*');
RESET ROLE;
SELECT max_attempts, paused FROM wf.queue_config WHERE queue = 'globex.mail';

-- Revoked, a right is gone at once, and EXECUTE with it once no grant of
-- the role needs the function.
SET ROLE sec_admin;
SELECT wf_revoke('sec_worker', 'work', 'acme.*');
SELECT wf_revoke('sec_worker', 'work', 'acme.*') AS revoked_twice;
RESET ROLE;
SELECT has_function_privilege('sec_worker', 'wf_claim(text,text,int,interval,interval,text[])', 'EXECUTE')
       AS worker_may_execute,
       has_function_privilege('sec_worker', 'wf_signal(text,jsonb)', 'EXECUTE') AS may_still_signal;
SET ROLE sec_worker;
SELECT try_sql($$SELECT * FROM wf_claim('acme.mail')$$) AS claim_after_revoke;
SELECT count(*) AS visible_jobs FROM wf.jobs;
RESET ROLE;

-- Clean up.
SELECT wf_revoke('sec_worker', 'signal', 'acme.*'), wf_revoke('sec_producer', 'produce', 'acme.*'),
       wf_revoke('sec_pool', 'work', 'acme.pool'), wf_revoke('sec_admin', 'administer', 'acme.*');
SELECT count(*) AS grants_left FROM wf.grants WHERE queues LIKE 'acme%';
DROP ROLE sec_admin, sec_producer, sec_worker, sec_other, sec_pool;
