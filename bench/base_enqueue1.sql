-- One job per transaction.
\set n random(1, 1000000)
INSERT INTO baseline_jobs (queue, payload)
VALUES (:q, jsonb_build_object('n', :n::int, 'to', 'user@example.com'));
