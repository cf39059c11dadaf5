-- The baseline of pg_wf's benchmark: the plain job table of the blog posts,
-- driven with FOR UPDATE SKIP LOCKED. Same column set as far as it matters
-- (queue, payload, status, priority, run_at, attempts), a partial index on
-- pending rows in claim order, nothing else. Plus the ceiling: a table of
-- counters whose one-row UPDATE is the cheapest durable commit there is.
CREATE TABLE baseline_jobs (
    id          bigserial PRIMARY KEY,
    queue       text        NOT NULL,
    payload     jsonb       NOT NULL DEFAULT '{}',
    status      text        NOT NULL DEFAULT 'pending',
    priority    int         NOT NULL DEFAULT 0,
    run_at      timestamptz NOT NULL DEFAULT now(),
    attempts    int         NOT NULL DEFAULT 0,
    depends_on  bigint[],
    result      jsonb,
    last_error  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz
);
CREATE INDEX baseline_jobs_pending ON baseline_jobs (queue, priority DESC, run_at, id)
    WHERE status = 'pending';

CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO counter (id) SELECT g FROM generate_series(1, 1000) g;
