-- pg_wf 1.4 -> 1.5: flow control inside the claim. Jobs carry a key (a
-- tenant, a customer); per queue, wf_configure_queue sets rate limits (for
-- the queue and per key), a concurrency limit per key, fair rotation over
-- keys, ordered groups (one job per key at a time, in enqueue order) and a
-- longest run time; wf_enqueue adds dedup windows and start-by deadlines.
-- ALTER EXTENSION pg_wf UPDATE runs this on an existing 1.4; a fresh
-- CREATE EXTENSION runs pg_wf--1.5.sql.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

ALTER TABLE wf.queue_config
    ADD COLUMN rate_limit      int      CHECK (rate_limit > 0),
    ADD COLUMN rate_period     interval CHECK (rate_period > interval '0'),
    ADD COLUMN key_rate_limit  int      CHECK (key_rate_limit > 0),
    ADD COLUMN key_concurrency int      CHECK (key_concurrency > 0),
    ADD COLUMN fair            boolean  NOT NULL DEFAULT false,
    ADD COLUMN ordered         boolean  NOT NULL DEFAULT false,
    ADD COLUMN max_run_time    interval CHECK (max_run_time > interval '0');

ALTER TABLE wf.job
    ADD COLUMN key          text COLLATE "C",
    ADD COLUMN dedup_key    text,
    ADD COLUMN max_run_time interval,
    ADD COLUMN start_by     timestamptz;
CREATE INDEX job_key ON wf.job (queue, key, id) WHERE key IS NOT NULL;
CREATE INDEX job_start_by ON wf.job (start_by) WHERE start_by IS NOT NULL;

ALTER TABLE wf.ready ADD COLUMN key text COLLATE "C";
CREATE INDEX ready_key_order ON wf.ready (queue, key, priority DESC, run_at, id);

ALTER TABLE wf.claim ADD COLUMN key text COLLATE "C", ADD COLUMN run_deadline timestamptz;
CREATE INDEX claim_key ON wf.claim (queue, key) WHERE key IS NOT NULL;

CREATE TABLE wf.dedup (
    queue     text   NOT NULL,
    dedup_key text   NOT NULL,
    job_id    bigint NOT NULL,
    PRIMARY KEY (queue, dedup_key)
);
CREATE TABLE wf.ordered_group (
    queue   text   NOT NULL,
    key     text   COLLATE "C" NOT NULL,
    head_id bigint NOT NULL,
    PRIMARY KEY (queue, key)
);
SELECT pg_catalog.pg_extension_config_dump('wf.dedup', '');
SELECT pg_catalog.pg_extension_config_dump('wf.ordered_group', '');
ALTER TABLE wf.dedup OWNER TO wf_owner;
ALTER TABLE wf.ordered_group OWNER TO wf_owner;

CREATE OR REPLACE VIEW wf.jobs WITH (security_barrier) AS
SELECT j.id, j.queue, CASE WHEN c.id IS NULL THEN j.status ELSE 'running' END AS status,
       j.payload, j.result, coalesce(c.attempt, j.attempt) AS attempt, j.max_attempts,
       j.priority, j.run_at, j.idempotency_key, j.workflow_id, j.step_name,
       j.depends_on, j.last_error, coalesce(c.worker, j.worker) AS worker,
       c.lease_expires_at, j.created_at, coalesce(c.started_at, j.started_at) AS started_at,
       j.finished_at, c.owner_pid, j.cancel_requested,
       w.event AS waiting_for, j.events, j.key, j.dedup_key, j.max_run_time, j.start_by,
       c.run_deadline
  FROM wf.job j
  LEFT JOIN wf.claim c ON j.status = 'pending' AND c.queue = j.queue AND c.id = j.id
                      AND c.attempt = j.attempt + 1
  LEFT JOIN wf.event_wait w ON j.status = 'waiting' AND w.queue = j.queue AND w.id = j.id
                           AND w.attempt = j.attempt
 WHERE wf._visible(j.queue);


CREATE FUNCTION wf._rate_left(queue text, key text, rate_limit int, rate_period interval)
RETURNS int AS 'MODULE_PATHNAME', 'wf_rate_left' LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;

-- One row per queue: a configured queue without jobs shows zeros.
-- rate_left: claims its rate limit still allows in the current window.
CREATE OR REPLACE VIEW wf.queue_stats WITH (security_barrier) AS
SELECT q.*, CASE WHEN c.rate_limit IS NOT NULL
                 THEN wf._rate_left(q.queue, NULL, c.rate_limit,
                                    coalesce(c.rate_period, interval '1 second')) END AS rate_left
FROM (SELECT queue,
       count(*) FILTER (WHERE status = 'blocked')   AS blocked,
       count(*) FILTER (WHERE status = 'pending')   AS pending,
       count(*) FILTER (WHERE status = 'running')   AS running,
       count(*) FILTER (WHERE status = 'waiting')   AS waiting,
       count(*) FILTER (WHERE status = 'done')      AS done,
       count(*) FILTER (WHERE status = 'failed')    AS failed,
       count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
       now() - min(run_at) FILTER (WHERE status = 'pending' AND run_at <= now())
                                                    AS oldest_ready_age
  FROM (SELECT queue, status, run_at FROM wf.job_states
        UNION ALL
        SELECT queue, NULL, NULL FROM wf.queue_config WHERE wf._visible(queue)) AS q
 GROUP BY queue) AS q
LEFT JOIN wf.queue_config c ON c.queue = q.queue;


CREATE VIEW wf.key_stats WITH (security_barrier) AS
SELECT k.queue, k.key, k.ready, k.running, c.key_concurrency,
       CASE WHEN c.key_rate_limit IS NOT NULL
            THEN wf._rate_left(k.queue, k.key, c.key_rate_limit,
                               coalesce(c.rate_period, interval '1 second')) END AS rate_left,
       h.id AS head, h.status AS head_status,
       CASE WHEN c.ordered AND h.status = 'failed' THEN 'ordered: head failed'
            WHEN c.ordered AND h.status = 'waiting' THEN 'ordered: head waiting'
            WHEN c.ordered AND h.status = 'blocked' THEN 'ordered: head blocked'
            WHEN c.ordered AND k.running > 0 THEN 'ordered: head running'
            WHEN c.ordered AND h.run_at > now() THEN 'ordered: head not due'
            WHEN k.running >= c.key_concurrency THEN 'key_concurrency'
            WHEN c.key_rate_limit IS NOT NULL
                 AND wf._rate_left(k.queue, k.key, c.key_rate_limit,
                                   coalesce(c.rate_period, interval '1 second')) = 0
              THEN 'key_rate_limit'
       END AS throttled
  FROM (SELECT queue, key, count(*) FILTER (WHERE ready) AS ready,
               count(*) FILTER (WHERE NOT ready) AS running
          FROM (SELECT r.queue, r.key, true AS ready FROM wf.ready r
                 WHERE r.key IS NOT NULL AND r.run_at <= now()
                UNION ALL
                SELECT c.queue, c.key, false FROM wf.claim c
                 WHERE c.key IS NOT NULL AND c.queue <> '') AS u
         WHERE wf._visible(queue)
         GROUP BY queue, key) AS k
  JOIN wf.queue_config c ON c.queue = k.queue
       AND (c.fair OR c.ordered OR c.key_concurrency IS NOT NULL OR c.key_rate_limit IS NOT NULL)
  LEFT JOIN LATERAL (
       SELECT j.id, CASE WHEN j.status = 'pending' AND k.running > 0 THEN 'running'
                         ELSE j.status END AS status, j.run_at
         FROM wf.job j
        WHERE c.ordered AND j.queue = k.queue AND j.key = k.key
          AND j.id >= coalesce((SELECT g.head_id FROM wf.ordered_group g
                                 WHERE g.queue = k.queue AND g.key = k.key), 0)
          AND j.status NOT IN ('done', 'cancelled')
        ORDER BY j.id LIMIT 1) AS h ON true;

ALTER FUNCTION wf._rate_left(text, text, int, interval) OWNER TO wf_owner;
ALTER VIEW wf.key_stats OWNER TO wf_owner;
GRANT SELECT ON wf.key_stats TO PUBLIC;

-- Three functions take new arguments. The roles that could run the old
-- ones (wf_grant gave them EXECUTE) can run the new ones.
-- A table of the schema, dropped below, not a temporary one: on Citus the
-- script also runs on the workers inside a prepared transaction, which
-- may not touch temporary objects.
CREATE TABLE wf._old_grants AS
SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee
  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
 WHERE p.oid IN ('wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[])'::pg_catalog.regprocedure,
                 'wf_enqueue_batch(text, jsonb)'::pg_catalog.regprocedure,
                 'wf_configure_queue(text, int, interval, interval, interval, int, boolean)'::pg_catalog.regprocedure)
   AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
   AND a.grantee <> 'wf_owner'::regrole;

DROP FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[]);
DROP FUNCTION wf_enqueue_batch(text, jsonb);
DROP FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean);

CREATE FUNCTION wf_enqueue(queue text, payload jsonb DEFAULT '{}',
                           run_at timestamptz DEFAULT NULL, priority int DEFAULT 0,
                           max_attempts int DEFAULT NULL, idempotency_key text DEFAULT NULL,
                           workflow_id uuid DEFAULT NULL, step_name text DEFAULT NULL,
                           depends_on bigint[] DEFAULT NULL, key text DEFAULT NULL,
                           dedup_key text DEFAULT NULL, on_duplicate text DEFAULT 'keep',
                           max_run_time interval DEFAULT NULL,
                           start_by timestamptz DEFAULT NULL)
RETURNS bigint AS 'MODULE_PATHNAME', 'wf_enqueue' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

-- keys: one per payload (or NULL), in the same order.
CREATE FUNCTION wf_enqueue_batch(queue text, payloads jsonb, keys text[] DEFAULT NULL)
RETURNS SETOF bigint AS 'MODULE_PATHNAME', 'wf_enqueue_batch' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_configure_queue(queue text, max_attempts int DEFAULT NULL,
                                   backoff_base interval DEFAULT NULL,
                                   backoff_max interval DEFAULT NULL,
                                   lease interval DEFAULT NULL, max_running int DEFAULT NULL,
                                   paused boolean DEFAULT NULL, rate_limit int DEFAULT NULL,
                                   rate_period interval DEFAULT NULL,
                                   key_rate_limit int DEFAULT NULL,
                                   key_concurrency int DEFAULT NULL, fair boolean DEFAULT NULL,
                                   ordered boolean DEFAULT NULL,
                                   max_run_time interval DEFAULT NULL)
RETURNS void AS 'MODULE_PATHNAME', 'wf_configure_queue' LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

ALTER FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz) OWNER TO wf_owner;
ALTER FUNCTION wf_enqueue_batch(text, jsonb, text[]) OWNER TO wf_owner;
ALTER FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval) OWNER TO wf_owner;
REVOKE EXECUTE ON FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_enqueue_batch(text, jsonb, text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval) FROM PUBLIC;

DO $$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT name, grantee FROM wf._old_grants LOOP
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s',
      CASE g.name
        WHEN 'wf_enqueue' THEN 'wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz)'
        WHEN 'wf_enqueue_batch' THEN 'wf_enqueue_batch(text, jsonb, text[])'
        ELSE 'wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval)'
      END, g.grantee);
  END LOOP;
END $$;
DROP TABLE wf._old_grants;
-- Privileges granted by an extension's script are recorded as its initial
-- privileges, which pg_dump leaves out. Those grants belong to the roles,
-- not to pg_wf: the initial privileges of the three functions are what a
-- fresh install gives them, so that a dump keeps the grants above.
UPDATE pg_catalog.pg_init_privs
   SET initprivs = '{wf_owner=X/wf_owner}'
 WHERE classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND objsubid = 0
   AND objoid IN ('wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz)'::pg_catalog.regprocedure,
                  'wf_enqueue_batch(text, jsonb, text[])'::pg_catalog.regprocedure,
                  'wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval)'::pg_catalog.regprocedure);
