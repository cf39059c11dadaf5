# Flow control under concurrency, on a real server with pg_wf preloaded
# (test/flow/stress.py drives it). Claimer processes, several connections
# each, claim with small max_jobs (some with wait =>) from four queues and end
# each job after a short random piece of work -- mostly wf_complete, some
# wf_complete_and_claim (the next claim in the same call), some wf_fail with
# a short retry -- while producers keep enqueueing (into the ordered queue
# also from transactions left open a few milliseconds); every second or two
# one claimer process that holds a job is SIGKILLed (a client killed
# mid-job) and replaced, and the reaper gives its jobs back to the others.
# Then, from what the server recorded -- each claim and each end of an
# attempt logs itself in its own statement, so the logs hold exactly what
# committed, a killed client's claims included:
#  - fc.rate (rate_limit 50 per 1 s) and fc.krate (key_rate_limit 8 per 1 s
#    per key): in no window of 1 s did the claims (their wf.claim.started_at,
#    shared by the jobs of one call) exceed the limit;
#  - fc.kc (key_concurrency 2): at no moment did a key run more than 2 jobs,
#    and fc.ord (ordered): never more than 1. From moments at which each
#    attempt certainly ran (see below), an interval per attempt: if more than
#    the limit of them of one key share a moment, the server ran more than
#    the limit then. Samples of the running jobs every 10 ms are checked on
#    their own too;
#  - fc.ord is FIFO: within each key the first claims follow the ids, and no
#    job was claimed before the previous job of its key had ended done (a job
#    skipped, never claimed, shows here too);
#  - every job ends done exactly once: one successful wf_complete, of its
#    last attempt; attempts numbered 1..n each claimed once and ended at most
#    once; each attempt before the last failed (wf_fail) or was held by a
#    killed claimer; no wf_complete or wf_fail of a live claimer found its
#    token stale;
#  - the limits were reached (the checks had something to catch), and no
#    backend crashed.
# Then fairness: 100,000 jobs of key A, then 100 of key B, in a fair queue;
# 8 claimers taking one job at a time must have claimed all of B within the
# first 300 claims (the position of B's last claim is printed; about 200 is
# one B per A).
#
# Found by this test: on 79f4289, a job enqueued into an ordered queue by a
# transaction that committed after a later-numbered job of its key was
# claimed was skipped for good (its group's head had moved past it): a few
# jobs per run were never claimed. Fixed by 0714dc1 (an enqueue holds its
# keys' locks until it commits).
#
# PG_WF_FLOW_SECONDS (default 20) sets the stress's length, PG_WF_FLOW_SEED
# its seed (default random, printed; the interleaving is not reproducible,
# the choices each claimer makes are), PG_WF_FLOW_CLAIMERS (8) and
# PG_WF_FLOW_CONNS (3) the claimer processes and their connections,
# PG_WF_FLOW_KILL_EVERY (1.5) the seconds between kills, PG_WF_FLOW_FAIR_A
# (100000) the A jobs of the fairness check. Claimers' stderr is in
# tmp_check/log/flow_claimer_*.err.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run ();
use JSON::PP ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WfTap;

my $seconds = $ENV{PG_WF_FLOW_SECONDS} // 20;
my $seed = $ENV{PG_WF_FLOW_SEED};
my $claimers = $ENV{PG_WF_FLOW_CLAIMERS} // 8;
my $conns = $ENV{PG_WF_FLOW_CONNS} // 3;
my $kill_every = $ENV{PG_WF_FLOW_KILL_EVERY} // 1.5;
my $fair_a = $ENV{PG_WF_FLOW_FAIR_A} // 100000;
my $rate_limit = 50;
my $key_rate_limit = 8;
my $key_concurrency = 2;
my $t_start = Time::HiRes::time();

my $node = wf_node('flow', sweep_interval => '200ms', conf => q{
max_connections = 100
log_error_verbosity = verbose
log_min_messages = warning
});

# The queues, and the logs the driver's statements fill. No queue has a
# max_run_time: the claims ask for a lease of 1 hour, so lease_expires_at
# - 1 hour is their started_at. Recovered jobs keep their place; short
# backoffs and many attempts keep a job that lost a few claimers in play.
$node->safe_psql('postgres', qq{
SELECT wf_configure_queue('fc.rate', rate_limit => $rate_limit, rate_period => '1 second',
                          max_attempts => 100, backoff_base => '10 ms', backoff_max => '50 ms');
SELECT wf_configure_queue('fc.krate', key_rate_limit => $key_rate_limit, rate_period => '1 second',
                          max_attempts => 100, backoff_base => '10 ms', backoff_max => '50 ms');
SELECT wf_configure_queue('fc.kc', key_concurrency => $key_concurrency,
                          max_attempts => 100, backoff_base => '10 ms', backoff_max => '50 ms');
SELECT wf_configure_queue('fc.ord', ordered => true,
                          max_attempts => 100, backoff_base => '10 ms', backoff_max => '50 ms');
SELECT wf_configure_queue('fc.fair', fair => true);
CREATE TABLE flow_claim (seq bigserial PRIMARY KEY, queue text NOT NULL, id bigint NOT NULL,
                         attempt int NOT NULL, started_at timestamptz NOT NULL,
                         claimed_at timestamptz NOT NULL, seen_at timestamptz,
                         claimer text NOT NULL, via text NOT NULL DEFAULT 'wf_claim');
CREATE INDEX ON flow_claim (queue, id, attempt);
CREATE TABLE flow_end (queue text NOT NULL, id bigint NOT NULL, attempt int NOT NULL,
                       kind text NOT NULL, outcome text, end_before timestamptz NOT NULL,
                       claimer text NOT NULL);
CREATE INDEX ON flow_end (queue, id, attempt);
CREATE TABLE flow_kill (claimer text PRIMARY KEY, killed_at timestamptz NOT NULL);
CREATE TABLE flow_sample (at timestamptz NOT NULL, queue text NOT NULL, id bigint NOT NULL,
                          attempt int NOT NULL, key text);
CREATE TABLE fair_claim (seq bigserial PRIMARY KEY, id bigint NOT NULL, attempt int NOT NULL,
                         started_at timestamptz NOT NULL, claimer text NOT NULL);
});

my $dsn = sprintf('host=%s port=%d dbname=postgres', $node->host, $node->port);
my $driver = "$FindBin::RealBin/../flow/stress.py";

# Runs the driver; its last stdout line is a JSON report.
sub drive
{
	my ($timeout, @args) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ '/usr/bin/python3', $driver, @args ],
		'>', \$out, '2>', \$err, IPC::Run::timeout($timeout));
	$h->finish;
	my $rc = $h->result(0);
	my ($json) = reverse grep { /^\{/ } split /\n/, $out;
	my $report = eval { JSON::PP::decode_json($json // '') };
	return ($rc, $report, $out, $err);
}

sub rows
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

# ---- the stress ----
my @run = ('run', '--dsn' => $dsn, '--seconds' => $seconds, '--claimers' => $claimers,
	'--conns' => $conns, '--kill-every' => $kill_every, '--rate-limit' => $rate_limit,
	'--key-rate-limit' => $key_rate_limit,
	'--log-dir' => $PostgreSQL::Test::Utils::log_path);
push @run, '--seed' => $seed if defined $seed && $seed ne '';
my ($rc, $report, $out, $err) = drive($seconds + 180, @run);
is($rc, 0, 'the stress driver ran to its end') or diag("$out\n$err");
ok($report, 'the driver printed its figures') or BAIL_OUT("no report: $out\n$err");
note(join(' ', grep { /^flow stress/ } split /\n/, $out));
is_deeply($report->{errors}, [], 'no claimer, producer or sampler hit an error')
  or diag(join("\n", @{ $report->{errors} }));
is($report->{left_after_drain}, 0, 'the claimers drained every queue');

my $claims = rows(q{SELECT count(*) FROM flow_claim});
diag(sprintf('stress: %d s run + %.1f s drain (seed %d); %d claimer processes (%d x %d connections'
	  . ' at a time), %d SIGKILLed mid-job; %d jobs enqueued (%s); %d claims, %d samples',
	$report->{run_s}, $report->{drain_s}, $report->{seed}, $report->{claimer_processes},
	$claimers, $conns, $report->{kills}, $report->{enqueued_total},
	join(', ', map { "$_ $report->{enqueued}{$_}" } sort keys %{ $report->{enqueued} }),
	$claims, $report->{samples}));

# ---- every job done exactly once ----
is( rows(q{SELECT coalesce(string_agg(queue || ' ' || status || ' ' || n, ', '), '')
	         FROM (SELECT queue, status, count(*) AS n FROM wf.job
	                WHERE queue IN ('fc.rate', 'fc.krate', 'fc.kc', 'fc.ord') AND status <> 'done'
	                GROUP BY 1, 2) s}),
	'', 'every job of the stress is done');
is(rows(q{SELECT count(*) FROM wf.job WHERE queue IN ('fc.rate', 'fc.krate', 'fc.kc', 'fc.ord')}),
	$report->{enqueued_total}, 'the server has every job the producers enqueued, and no other');
is( rows(q{SELECT string_agg(format('%s/%s/%s by %s: %s gave %s', queue, id, attempt, claimer,
	                                 kind, coalesce(outcome, 'NULL')), ', ')
	         FROM flow_end
	        WHERE outcome IS DISTINCT FROM CASE kind WHEN 'complete' THEN 'true' ELSE 'pending' END}),
	'', 'every wf_complete of a live claimer returned true, every wf_fail pending'
	  . ' (no token went stale under it)');
is( rows(q{SELECT string_agg(format('%s/%s/%s x%s', queue, id, attempt, n), ', ')
	         FROM (SELECT queue, id, attempt, count(*) AS n FROM flow_claim
	                GROUP BY 1, 2, 3 HAVING count(*) > 1) d}),
	'', 'no attempt was handed out twice');
is( rows(q{SELECT string_agg(format('%s/%s/%s x%s', queue, id, attempt, n), ', ')
	         FROM (SELECT queue, id, attempt, count(*) AS n FROM flow_end
	                GROUP BY 1, 2, 3 HAVING count(*) > 1) d}),
	'', 'no attempt ended twice');
is( rows(q{
SELECT string_agg(format('%s/%s: %s completions, attempts %s, job attempt %s', j.queue, j.id,
                         coalesce(e.n, 0), c.attempts, j.attempt), E'\n')
  FROM wf.job j
  LEFT JOIN (SELECT queue, id, count(*) AS n, max(attempt) AS attempt FROM flow_end
              WHERE kind = 'complete' AND outcome = 'true' GROUP BY 1, 2) e
         ON e.queue = j.queue AND e.id = j.id
  LEFT JOIN (SELECT queue, id, array_agg(attempt ORDER BY attempt) AS attempts
               FROM flow_claim GROUP BY 1, 2) c ON c.queue = j.queue AND c.id = j.id
 WHERE j.queue IN ('fc.rate', 'fc.krate', 'fc.kc', 'fc.ord')
   AND (e.n IS DISTINCT FROM 1 OR e.attempt IS DISTINCT FROM j.attempt
        OR c.attempts IS DISTINCT FROM ARRAY(SELECT generate_series(1, j.attempt)))}),
	'', 'each job: one successful completion, of its last attempt; attempts 1..n each claimed once');
is( rows(q{
SELECT string_agg(format('%s/%s/%s by %s', c.queue, c.id, c.attempt, c.claimer), ', ')
  FROM flow_claim c
 WHERE NOT EXISTS (SELECT 1 FROM flow_end e
                    WHERE e.queue = c.queue AND e.id = c.id AND e.attempt = c.attempt)
   AND NOT EXISTS (SELECT 1 FROM flow_kill k WHERE k.claimer = split_part(c.claimer, '/', 1))}),
	'', 'every attempt that neither completed nor failed belonged to a killed claimer');
my $orphans = rows(q{
SELECT count(*) FROM flow_claim c
 WHERE NOT EXISTS (SELECT 1 FROM flow_end e
                    WHERE e.queue = c.queue AND e.id = c.id AND e.attempt = c.attempt)});
my $orphans_seen = rows(q{
SELECT count(*) FROM flow_claim c
 WHERE c.seen_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM flow_end e
                    WHERE e.queue = c.queue AND e.id = c.id AND e.attempt = c.attempt)});
note('attempts ended by wf_fail (retried): '
	  . rows(q{SELECT count(*) FROM flow_end WHERE kind = 'fail'})
	  . '; claims by ' . rows(q{SELECT string_agg(via || ' ' || n, ', ')
	                              FROM (SELECT via, count(*) AS n FROM flow_claim GROUP BY 1) v}));
diag("kills: $report->{kills}; attempts they left unfinished: $orphans"
	  . " ($orphans_seen of them after the claimer had seen its claim)");
note('attempts of killed claimers claimed again (next attempt) after a median of '
	  . rows(q{
SELECT format('%s ms, at most %s ms (%s attempts)',
              round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)), round(max(ms)), count(*))
  FROM (SELECT extract(epoch FROM n.started_at - k.killed_at) * 1000 AS ms
          FROM flow_claim c
          JOIN flow_kill k ON k.claimer = split_part(c.claimer, '/', 1)
          JOIN flow_claim n ON n.queue = c.queue AND n.id = c.id AND n.attempt = c.attempt + 1
         WHERE NOT EXISTS (SELECT 1 FROM flow_end e
                            WHERE e.queue = c.queue AND e.id = c.id AND e.attempt = c.attempt)) r}));
if ($kill_every > 0 && $seconds >= 5)
{
	cmp_ok($report->{kills}, '>=', 3, 'claimers were killed mid-job');
	cmp_ok($orphans_seen, '>', 0,
		'killed claimers held jobs, which the reaper gave back and others finished');
}

# ---- rate limits: no window of 1 s over the limit ----
# For each claim time t, the claims in (t - 1 s, t] (the peers of t, the jobs
# of one call, all count).
my $window = q{RANGE BETWEEN interval '999999 microseconds' PRECEDING AND CURRENT ROW};
my ($rate_claims, $rate_max) = split /\|/, rows(qq{
SELECT count(*), coalesce(max(n), 0) FROM (
  SELECT count(*) OVER (ORDER BY started_at $window) AS n
    FROM flow_claim WHERE queue = 'fc.rate') w});
my ($krate_claims, $krate_max) = split /\|/, rows(qq{
SELECT count(*), coalesce(max(n), 0) FROM (
  SELECT count(*) OVER (PARTITION BY j.key ORDER BY c.started_at $window) AS n
    FROM flow_claim c JOIN wf.job j ON j.queue = c.queue AND j.id = c.id
   WHERE c.queue = 'fc.krate') w});
diag("fc.rate: $rate_claims claims, at most $rate_max in any 1 s window (limit $rate_limit);"
	  . " fc.krate: $krate_claims claims, at most $krate_max of a key in any 1 s window"
	  . " (limit $key_rate_limit)");
# The first windows over the limit, with the claims in them.
sub over_limit
{
	my ($queue, $limit, $per_key) = @_;
	my $part = $per_key ? 'PARTITION BY key' : '';
	return rows(qq{
WITH c AS (SELECT c.seq, c.id, c.attempt, c.started_at, c.claimer, j.key
             FROM flow_claim c JOIN wf.job j ON j.queue = c.queue AND j.id = c.id
            WHERE c.queue = '$queue'),
w AS (SELECT key, started_at, count(*) OVER ($part ORDER BY started_at $window) AS n FROM c)
SELECT string_agg(format('key %s: %s claims in the 1 s up to %s: %s', w.key, w.n, w.started_at,
                         (SELECT string_agg(format('%s/%s at %s by %s', c.id, c.attempt,
                                                   c.started_at, c.claimer), ', '
                                            ORDER BY c.started_at)
                            FROM c WHERE c.started_at > w.started_at - interval '1 second'
                             AND c.started_at <= w.started_at
                             AND (NOT $per_key OR c.key = w.key))), E'\n')
  FROM (SELECT DISTINCT * FROM w WHERE n > $limit ORDER BY started_at LIMIT 3) w});
}
cmp_ok($rate_max, '<=', $rate_limit, "fc.rate: no window of 1 s has more than $rate_limit claims")
  or diag(over_limit('fc.rate', $rate_limit, 'false'));
cmp_ok($krate_max, '<=', $key_rate_limit,
	"fc.krate: no window of 1 s has more than $key_rate_limit claims of one key")
  or diag(over_limit('fc.krate', $key_rate_limit, 'true'));
# The limits held the claimers back: a run far below them would prove nothing.
cmp_ok($rate_max, '>=', int($rate_limit * 0.9), 'fc.rate ran at its limit');
cmp_ok($krate_max, '>=', int($key_rate_limit * 0.75), 'fc.krate ran at its limit');

# ---- per-key concurrency and ordered groups: never more than the limit ----
# Each attempt's interval where it certainly ran (its claim row was
# committed and not yet removed), from times that are each such a moment:
#  - seen_at: the claimer's next statement after the claim returned (so
#    after its commit); nothing but that claimer, or the reaper once its
#    session is gone, ends the attempt;
#  - end_before: the clock just before its wf_complete / wf_fail ran;
#  - the kill of its claimer, when that claimer had seen the claim and never
#    ended the attempt (the reaper ended it after the session was gone);
#  - the statement time of each sample that saw it running, but the first
#    sample of an attempt only if it began after seen_at: a sample's snapshot
#    is taken just after its statement time, and may see a claim that
#    committed in between; a later sample began after that snapshot.
# Intervals of one key sorted by time, ends first at equal times: more than
# the limit at once means the server ran more than the limit of that key.
my $intervals = q{
WITH s AS (SELECT queue, id, attempt, at,
                  row_number() OVER (PARTITION BY queue, id, attempt ORDER BY at) AS k
             FROM flow_sample WHERE queue = $1),
safe AS (SELECT s.id, s.attempt, min(s.at) AS first, max(s.at) AS last
           FROM s JOIN flow_claim c ON c.queue = s.queue AND c.id = s.id AND c.attempt = s.attempt
          WHERE s.k > 1 OR s.at >= c.seen_at
          GROUP BY 1, 2),
att AS (
  SELECT c.queue, j.key, c.id, c.attempt, c.claimer,
         least(c.seen_at, safe.first) AS a,
         greatest(e.end_before,
                  CASE WHEN e.id IS NULL AND c.seen_at IS NOT NULL THEN k.killed_at END,
                  safe.last) AS b
    FROM flow_claim c
    JOIN wf.job j ON j.queue = c.queue AND j.id = c.id
    LEFT JOIN flow_end e ON e.queue = c.queue AND e.id = c.id AND e.attempt = c.attempt
    LEFT JOIN flow_kill k ON k.claimer = split_part(c.claimer, '/', 1)
    LEFT JOIN safe ON safe.id = c.id AND safe.attempt = c.attempt
   WHERE c.queue = $1),
ev AS (SELECT key, a AS t, 1 AS d, id, attempt FROM att WHERE a <= b
       UNION ALL
       SELECT key, b, -1, id, attempt FROM att WHERE a <= b),
run AS (SELECT key, t, d, id, attempt,
               sum(d) OVER (PARTITION BY key ORDER BY t, d, id, attempt ROWS UNBOUNDED PRECEDING) AS n
          FROM ev)
};
sub overlap_check
{
	my ($queue, $limit) = @_;
	(my $sql = $intervals) =~ s/\$1/'$queue'/g;
	my ($n, $max, $at_limit) = split /\|/, rows(qq{$sql
SELECT (SELECT count(*) FROM att WHERE a <= b), coalesce(max(n), 0),
       count(*) FILTER (WHERE d = 1 AND n = $limit) FROM run});
	diag("$queue: $n attempts with a known running interval; at most $max of a key at once"
		  . " (limit $limit); $at_limit claims brought a key to its limit");
	cmp_ok($max, '<=', $limit, "$queue: never more than $limit running jobs of a key")
	  or diag(rows(qq{$sql
SELECT string_agg(format('key %s at %s: %s running: %s', r.key, r.t, r.n,
                         (SELECT string_agg(format('%s/%s [%s, %s] by %s', a.id, a.attempt,
                                                   a.a, a.b, a.claimer), ', ')
                            FROM att a WHERE a.key = r.key AND a.a <= r.t AND a.b >= r.t)),
                  E'\n')
  FROM (SELECT * FROM run WHERE n > $limit ORDER BY t LIMIT 5) r}));
	return $at_limit;
}
my $kc_at_limit = overlap_check('fc.kc', $key_concurrency);
my $ord_at_limit = overlap_check('fc.ord', 1);
cmp_ok($kc_at_limit, '>', 0, 'fc.kc: keys reached their concurrency limit (the check could fail)');

# The samples on their own: each one statement, one snapshot.
my ($samples, $sample_kc, $sample_ord, $kc_full) = split /\|/, rows(qq{
SELECT count(DISTINCT at),
       coalesce(max(n) FILTER (WHERE queue = 'fc.kc'), 0),
       coalesce(max(n) FILTER (WHERE queue = 'fc.ord'), 0),
       count(*) FILTER (WHERE queue = 'fc.kc' AND n = $key_concurrency)
  FROM (SELECT at, queue, key, count(*) AS n FROM flow_sample GROUP BY 1, 2, 3) s});
note("samples: $samples with a running job; most running of one key: fc.kc $sample_kc,"
	  . " fc.ord $sample_ord; (sample, key) pairs of fc.kc at its limit: $kc_full");
cmp_ok($sample_kc, '<=', $key_concurrency, 'no sample saw a key of fc.kc over its limit');
cmp_ok($sample_ord, '<=', 1, 'no sample saw two running jobs of a key of fc.ord');

# ---- ordered groups: FIFO ----
is( rows(q{
SELECT string_agg(format('key %s: job %s claimed first after job %s', key, id, prev), E'\n')
  FROM (SELECT j.key, c.id,
               lag(c.id) OVER (PARTITION BY j.key ORDER BY c.claimed_at, c.seq) AS prev
          FROM flow_claim c JOIN wf.job j ON j.queue = c.queue AND j.id = c.id
         WHERE c.queue = 'fc.ord' AND c.attempt = 1) x
 WHERE prev > id}),
	'', 'fc.ord: within each key, first claims follow the enqueue (id) order');
# A claim comes after the completion it waited for has committed, so its
# claimed_at is later than that completion's end_before. A job skipped (never
# claimed, or claimed late) shows here with the job claimed past it.
is( rows(q{
SELECT string_agg(format('key %s: job %s claimed at %s, before job %s %s', x.key, x.id,
                         f.first_claim, x.prev,
                         coalesce('ended done at ' || d.end_before, 'ended done (never)')), E'\n')
  FROM (SELECT key, id, lag(id) OVER (PARTITION BY key ORDER BY id) AS prev
          FROM wf.job WHERE queue = 'fc.ord') x
  JOIN (SELECT id, min(claimed_at) AS first_claim FROM flow_claim
         WHERE queue = 'fc.ord' GROUP BY id) f ON f.id = x.id
  LEFT JOIN flow_end d ON d.queue = 'fc.ord' AND d.id = x.prev AND d.kind = 'complete'
                       AND d.outcome = 'true'
 WHERE x.prev IS NOT NULL AND (d.id IS NULL OR f.first_claim <= d.end_before)}),
	'', 'fc.ord: no job was claimed before the previous job of its key had ended done');
note('fc.ord: ' . rows(q{
SELECT format('%s jobs over %s keys (%s with a priority, %s due later than enqueued);'
              ' %s ran more than once (a kill or wf_fail)', count(*), count(DISTINCT key),
              count(*) FILTER (WHERE priority <> 0), count(*) FILTER (WHERE run_at > created_at),
              count(*) FILTER (WHERE attempt > 1))
  FROM wf.job WHERE queue = 'fc.ord'}));

# ---- fairness ----
($rc, $report, $out, $err) = drive(300, 'fair', '--dsn' => $dsn, '--a-jobs' => $fair_a,
	'--b-jobs' => 100, '--claimers' => 8);
is($rc, 0, 'the fairness driver ran to its end') or diag("$out\n$err");
ok($report, 'it printed its figures') or BAIL_OUT("no report: $out\n$err");
is_deeply($report->{errors}, [], 'no fairness claimer hit an error')
  or diag(join("\n", @{ $report->{errors} }));
is($report->{b_unclaimed}, 0, 'every job of key B was claimed');
my ($b_last, $b_first, $fair_claims) = split /\|/, rows(q{
SELECT max(pos) FILTER (WHERE key = 'B'), min(pos) FILTER (WHERE key = 'B'), count(*)
  FROM (SELECT j.key, row_number() OVER (ORDER BY f.started_at, f.seq) AS pos
          FROM fair_claim f JOIN wf.job j ON j.queue = 'fc.fair' AND j.id = f.id) x});
diag(sprintf('fairness: %d jobs of key A enqueued (in %.1f s), then 100 of key B; 8 claimers,'
	  . ' max_jobs 1: B\'s first claim was claim #%d, its last (100th) claim #%d of %d',
	$report->{a_jobs}, $report->{enqueue_a_s}, $b_first, $b_last, $fair_claims));
cmp_ok($b_last, '<=', 300, 'all 100 jobs of key B were claimed within the first 300 claims');

# ---- the server log: no crash ----
my $log = slurp_file($node->logfile);
my @crashes = grep {
	/PANIC|server process \(PID \d+\) (was terminated by signal|exited with exit code)|terminating any other active server processes/
} split /\n/, $log;
is(join("\n", @crashes[0 .. ($#crashes < 19 ? $#crashes : 19)]), '', 'no backend crashed');
my @internal = grep { /(ERROR|FATAL|PANIC):  (XX|58)[0-9A-Z]{3}:/ } split /\n/, $log;
is(join("\n", @internal[0 .. ($#internal < 19 ? $#internal : 19)]), '',
	'the log has no error of class XX or 58');
diag(sprintf('022_flow_control: %.0f s in all', Time::HiRes::time() - $t_start));

$node->stop;
done_testing();
