-- The ceiling: the two commits of a job (claim, complete) as the cheapest
-- durable writes there are, one-row UPDATEs of 1000 counters.
\set rid random(1, 1000)
UPDATE counter SET n = n + 1 WHERE id = :rid;
\set rid random(1, 1000)
UPDATE counter SET n = n + 1 WHERE id = :rid;
