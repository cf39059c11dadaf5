-- 1,000 jobs per statement from one JSON array (built server-side, as for pg_wf).
INSERT INTO baseline_jobs (queue, payload)
SELECT :q, e FROM jsonb_array_elements(
    (SELECT jsonb_agg(jsonb_build_object('n', g, 'to', 'user@example.com'))
       FROM generate_series(1, 1000) g)) AS e;
