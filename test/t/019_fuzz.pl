# The fuzzer (test/fuzz/fuzz.py): four clients call every wf_* function
# with random and boundary arguments, in and out of transactions, as a
# superuser and as a role with rights on some queues only, while one of them
# terminates another's backend (or the reaper) every few seconds. Then:
#  - no call failed with XX000 or another internal error (classes XX, 58),
#    no connection was lost but those we terminated, no call hung;
#  - the server log shows no crash: no PANIC, no backend ended by a signal
#    or an unexpected exit code, no error of class XX or 58;
#  - the invariants of the job tables hold, checked every few seconds while
#    the fuzzer runs (each check is one statement, one snapshot, and every
#    transition writes a job row and its ready or claim row in one
#    transaction) and again at the end, after the clients have gone and a
#    sweep: a pending job that no claim holds has exactly one ready row with
#    its (queue, priority, run_at, id), a running one none; every ready row
#    is such a job's; every claim (but the sentinel) holds a pending job at
#    attempt + 1, and is recovered within seconds once its owner is gone or
#    its lease ran out; at the end no claim is left; a blocked job counts
#    exactly its unfinished dependencies (pending_deps, less the releases
#    left to the worker), never < 0 and never 0, never a failed or
#    cancelled one; a waiting job has its wait row; a child workflow
#    (wf.child) and each of its steps name the parent job (child_of), and a
#    step with child_of is in such a child; a delivered outcome is the parent's events'
#    "wf:child:<name>". At the end only (after the worker's deliveries): a
#    child whose steps have all ended has its outcome recorded, every
#    outcome is delivered, a job awaiting its children has an undelivered
#    one, a cancelled job has no unfinished child;
#  - the server still enqueues, claims and completes a job.
#
# PG_WF_FUZZ_SECONDS (default 60) sets how long the fuzzer runs,
# PG_WF_FUZZ_SEED its seed (default: random, printed in the notes). Every
# call is in tmp_check/log/019_fuzz_trace.jsonl (SQL, arguments cut to 200
# characters, outcome); the unexpected errors come with each client's last
# 20 calls.
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

my $seconds = $ENV{PG_WF_FUZZ_SECONDS} // 60;
my $seed = $ENV{PG_WF_FUZZ_SEED};
my $clients = 4;

# The log keeps errors (with their SQLSTATE, their statement and its
# arguments cut to 200 bytes), not every statement: the fuzzer's arguments
# run to megabytes. Its trace has every call.
my $node = wf_node('fuzz', sweep_interval => '200ms', conf => q{
log_error_verbosity = verbose
log_statement = none
log_parameter_max_length_on_error = 200
max_connections = 40
});

# The non-superuser the fuzzer SETs ROLE to for a fraction of its calls:
# rights on some queues only (fuzz.py's QUEUES), so calls elsewhere get
# 42501. wf_fuzz_other is what its own wf_grant and wf_revoke calls change.
$node->safe_psql('postgres', q{
CREATE ROLE wf_fuzz_user;
CREATE ROLE wf_fuzz_other;
SELECT wf_grant('wf_fuzz_user', 'produce', 'fz.*');
SELECT wf_grant('wf_fuzz_user', 'work', 'fz.a');
SELECT wf_grant('wf_fuzz_user', 'work', 'fz.b');
SELECT wf_grant('wf_fuzz_user', 'signal', 'ev.*');
SELECT wf_grant('wf_fuzz_user', 'operate', 'fz.a');
SELECT wf_grant('wf_fuzz_user', 'administer', 'fz.c');
});

# ---- the invariants: each a query of the rows that break it ----
my %invariant = (
	'a: a pending job that no claim holds has exactly one ready row' => q{
SELECT format('job %s/%s, pending at attempt %s, has %s ready rows', j.queue, j.id, j.attempt, n.n)
  FROM wf.job j,
       LATERAL (SELECT count(*) AS n FROM wf.ready r
                 WHERE r.queue = j.queue AND r.priority = j.priority
                   AND r.run_at = j.run_at AND r.id = j.id) n
 WHERE j.status = 'pending' AND n.n <> 1
   AND NOT EXISTS (SELECT 1 FROM wf.claim c
                    WHERE c.queue = j.queue AND c.id = j.id AND c.attempt = j.attempt + 1)},
	'a: a running job has no ready row' => q{
SELECT format('job %s/%s runs attempt %s and has a ready row', j.queue, j.id, c.attempt)
  FROM wf.job j JOIN wf.claim c ON c.queue = j.queue AND c.id = j.id AND c.attempt = j.attempt + 1
 WHERE j.status = 'pending'
   AND EXISTS (SELECT 1 FROM wf.ready r WHERE r.queue = j.queue AND r.id = j.id)},
	'b: every ready row is the one of a pending job' => q{
SELECT format('ready row %s/%s (priority %s, run_at %s): job %s', r.queue, r.id, r.priority, r.run_at,
              coalesce(j.status || ' priority ' || j.priority || ' run_at ' || j.run_at, 'missing'))
  FROM wf.ready r LEFT JOIN wf.job j ON j.queue = r.queue AND j.id = r.id
 WHERE j.id IS NULL OR j.status <> 'pending' OR j.priority <> r.priority OR j.run_at <> r.run_at},
	'b: a job has at most one ready row' => q{
SELECT format('job %s/%s has %s ready rows', queue, id, count(*))
  FROM wf.ready GROUP BY queue, id HAVING count(*) > 1},
	'c: every claim holds a pending job at attempt + 1' => q{
SELECT format('claim %s/%s attempt %s: job %s', c.queue, c.id, c.attempt,
              coalesce(j.status || ' at attempt ' || j.attempt, 'missing'))
  FROM wf.claim c LEFT JOIN wf.job j ON j.queue = c.queue AND j.id = c.id
 WHERE c.queue <> '' AND (j.id IS NULL OR j.status <> 'pending' OR j.attempt + 1 <> c.attempt)},
	'c: the sentinel claim row is there (no crash emptied wf.claim)' => q{
SELECT format('%s sentinel rows', count(*)) FROM wf.claim WHERE queue = '' HAVING count(*) <> 1},
	'd: no blocked job has pending_deps < 0' => q{
SELECT format('job %s/%s is blocked with pending_deps %s', queue, id, pending_deps)
  FROM wf.job WHERE status = 'blocked' AND pending_deps < 0},
	# "Has some": an unfinished dependency or a release owed. A completion
	# that finds a child locked by another transaction (a sibling's
	# completion, an enqueue naming it in depends_on) leaves its release to
	# the worker: until the holder commits and the worker settles it, the
	# child is blocked with all its dependencies done and a debt.
	'd: a blocked job counts its unfinished dependencies and the releases owed, and has some' => q{
SELECT format('job %s/%s is blocked with pending_deps %s, %s releases owed, on %s unfinished of %s',
              j.queue, j.id, j.pending_deps, d.n, u.n, j.depends_on)
  FROM wf.job j,
       LATERAL (SELECT count(*) AS n FROM wf.release_debt r
                 WHERE r.child_queue = j.queue AND r.child_id = j.id) d,
       LATERAL (SELECT count(*) AS n FROM wf.job p
                 WHERE p.id = ANY (j.depends_on) AND p.status <> 'done') u
 WHERE j.status = 'blocked' AND (j.pending_deps - d.n <> u.n OR j.pending_deps = 0)},
	'd: no blocked job waits for a failed or cancelled one' => q{
SELECT format('job %s/%s is blocked on job %s, which is %s', j.queue, j.id, p.id, p.status)
  FROM wf.job j JOIN wf.job p ON p.id = ANY (j.depends_on)
 WHERE j.status = 'blocked' AND p.status IN ('failed', 'cancelled')},
	'e: a child workflow and its steps name the job that started it' => q{
SELECT format('child %s of job %s/%s (%s): %s', c.workflow_id, c.parent_queue, c.parent_id, c.name,
              CASE WHEN w.id IS NULL THEN 'no workflow row'
                   WHEN w.child_of IS DISTINCT FROM c.parent_id
                     THEN 'its workflow row has child_of ' || coalesce(w.child_of::text, 'NULL')
                   WHEN s.n = 0 THEN 'no steps'
                   ELSE s.bad || ' of ' || s.n || ' steps have child_of ' || s.other END)
  FROM wf.child c LEFT JOIN wf.workflow w ON w.id = c.workflow_id,
       LATERAL (SELECT count(*) AS n,
                       count(*) FILTER (WHERE j.child_of IS DISTINCT FROM c.parent_id) AS bad,
                       string_agg(DISTINCT coalesce(j.child_of::text, 'NULL'), ', ')
                         FILTER (WHERE j.child_of IS DISTINCT FROM c.parent_id) AS other
                  FROM wf.job j WHERE j.workflow_id = c.workflow_id) s
 WHERE w.id IS NULL OR w.child_of IS DISTINCT FROM c.parent_id OR s.n = 0 OR s.bad > 0},
	'e: a step with child_of is in a child workflow of that job' => q{
SELECT format('job %s/%s (workflow %s) has child_of %s, but no such child', j.queue, j.id,
              j.workflow_id, j.child_of)
  FROM wf.job j
 WHERE j.child_of IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM wf.child c
                    WHERE c.workflow_id = j.workflow_id AND c.parent_id = j.child_of)},
	'e: a delivered outcome is in its parent\'s events' => q{
SELECT format('child %s (%s) of job %s/%s, %s, delivered: outcome %s, parent''s events have %s',
              c.workflow_id, c.name, c.parent_queue, c.parent_id, coalesce(c.status, 'status NULL'),
              left(coalesce(c.outcome::text, 'NULL'), 200),
              left(coalesce((p.events -> ('wf:child:' || c.name))::text, 'nothing'), 200))
  FROM wf.child c JOIN wf.job p ON p.queue = c.parent_queue AND p.id = c.parent_id
 WHERE c.delivered
   AND (c.status IS NULL OR c.outcome IS NULL OR c.outcome ->> 'status' IS DISTINCT FROM c.status
        OR p.events -> ('wf:child:' || c.name) IS DISTINCT FROM c.outcome)},
	'a waiting job has its wait row' => q{
SELECT format('job %s/%s waits at attempt %s without a wait row', j.queue, j.id, j.attempt)
  FROM wf.job j
 WHERE j.status = 'waiting'
   AND NOT EXISTS (SELECT 1 FROM wf.event_wait w
                    WHERE w.queue = j.queue AND w.id = j.id AND w.attempt = j.attempt)},
);
# Only after the fuzz, its clients gone, a sweep and the worker's
# deliveries: a child's end is recorded by the transaction that ends its
# last step, and delivered then or by the worker's next pass; a parent that
# awaits its children is woken by the last delivery.
my %final_invariant = (
	'f: a child whose steps have all ended has its outcome recorded' => q{
SELECT format('child %s (%s) of job %s/%s has status NULL; its steps: %s', c.workflow_id, c.name,
              c.parent_queue, c.parent_id,
              (SELECT string_agg(j.id || ' ' || j.status, ', ' ORDER BY j.id)
                 FROM wf.job j WHERE j.workflow_id = c.workflow_id))
  FROM wf.child c
 WHERE c.status IS NULL
   AND NOT EXISTS (SELECT 1 FROM wf.job j WHERE j.workflow_id = c.workflow_id
                      AND j.status IN ('blocked', 'pending', 'waiting'))},
	'f: a cancelled job has no unfinished child' => q{
SELECT format('job %s/%s is cancelled; its child %s (%s) is unfinished, steps: %s', p.queue, p.id,
              c.workflow_id, c.name,
              (SELECT string_agg(j.id || ' ' || j.status, ', ' ORDER BY j.id)
                 FROM wf.job j WHERE j.workflow_id = c.workflow_id))
  FROM wf.child c JOIN wf.job p ON p.queue = c.parent_queue AND p.id = c.parent_id
 WHERE p.status = 'cancelled' AND c.status IS NULL},
	'f: every recorded outcome was delivered' => q{
SELECT format('child %s (%s) of job %s/%s ended %s at %s and is not delivered', c.workflow_id,
              c.name, c.parent_queue, c.parent_id, c.status, c.finished_at)
  FROM wf.child c WHERE c.status IS NOT NULL AND NOT c.delivered},
	'f: a job awaiting its children has an undelivered one' => q{
SELECT format('job %s/%s waits for its children at attempt %s; none undelivered (%s children)',
              j.queue, j.id, j.attempt,
              (SELECT count(*) FROM wf.child c WHERE c.parent_queue = j.queue AND c.parent_id = j.id))
  FROM wf.job j JOIN wf.event_wait w ON w.queue = j.queue AND w.id = j.id AND w.attempt = j.attempt
 WHERE j.status = 'waiting' AND w.event = 'wf:children'
   AND NOT EXISTS (SELECT 1 FROM wf.child c
                    WHERE c.parent_queue = j.queue AND c.parent_id = j.id AND NOT c.delivered)},
);
my @names = sort keys %invariant;
my @final_names = sort keys %final_invariant;
# One statement, one snapshot: every broken invariant, up to 5 rows each.
my $check_sql = join("\nUNION ALL\n",
	map {
		my $i = $_;
		"(SELECT $i || ': ' || v FROM ($invariant{$names[$i]}) AS x(v) LIMIT 5)"
	} 0 .. $#names);

# Claims whose owner session is gone or whose lease ran out: the reaper
# (every 200 ms, and at once when a claiming session exits) recovers them.
# One seen again, unchanged, more than 5 s later was left behind.
my $stale_sql = q{
SELECT format('%s/%s/%s/%s/%s', c.queue, c.id, c.attempt, c.owner_session, c.lease_expires_at)
  FROM wf.claim c
 WHERE c.queue <> ''
   AND (c.lease_expires_at < now()
        OR NOT EXISTS (SELECT 1 FROM pg_locks l
                        WHERE l.locktype = 'advisory' AND l.objsubid = 22342 AND l.granted
                          AND l.database = (SELECT oid FROM pg_database
                                             WHERE datname = current_database())
                          AND ((l.classid::bigint << 32) | l.objid::bigint) = c.owner_session))};

my %broken;        # invariant name -> the first rows seen breaking it
my %stale_since;   # claim -> when it was first seen stale
my %left_behind;
my $checks = 0;

my $final_check_sql = join("\nUNION ALL\n",
	map {
		my $i = $_;
		"(SELECT $i || ': ' || v FROM ($final_invariant{$final_names[$i]}) AS x(v) LIMIT 5)"
	} 0 .. $#final_names);

sub check_final_invariants
{
	my ($rc, $out, $err) = $node->psql('postgres', $final_check_sql);
	if ($rc != 0)
	{
		$broken{'the invariant check ran'} //= "final: $err";
		return;
	}
	for my $line (split /\n/, $out)
	{
		my ($i, $row) = $line =~ /^(\d+): (.*)$/ or next;
		push @{ $broken{ $final_names[$i] } }, $row;
	}
	return;
}

sub check_invariants
{
	my ($when) = @_;
	$checks++;
	my ($rc, $out, $err) = $node->psql('postgres', $check_sql);
	if ($rc != 0)
	{
		$broken{'the invariant check ran'} //= "$when: $err";
		return;
	}
	for my $line (split /\n/, $out)
	{
		my ($i, $row) = $line =~ /^(\d+): (.*)$/ or next;
		push @{ $broken{ $names[$i] } }, "$when: $row" if @{ $broken{ $names[$i] } // [] } < 10;
	}
	return;
}

sub check_stale_claims
{
	my $now = Time::HiRes::time();
	my ($rc, $out, $err) = $node->psql('postgres', $stale_sql);
	return if $rc != 0;
	my %seen = map { $_ => 1 } grep { $_ ne '' } split /\n/, $out;
	for my $claim (keys %seen)
	{
		$stale_since{$claim} //= $now;
		$left_behind{$claim} = 1 if $now - $stale_since{$claim} > 5;
	}
	delete $stale_since{$_} for grep { !$seen{$_} } keys %stale_since;
	return;
}

# ---- the fuzzer ----
my $trace = "$PostgreSQL::Test::Utils::log_path/019_fuzz_trace.jsonl";
my $dsn = sprintf('host=%s port=%d dbname=postgres', $node->host, $node->port);
my @cmd = (
	'/usr/bin/python3', "$FindBin::RealBin/../fuzz/fuzz.py",
	'--dsn' => $dsn, '--seconds' => $seconds, '--clients' => $clients,
	'--role' => 'wf_fuzz_user', '--trace' => $trace);
push @cmd, '--seed' => $seed if defined $seed && $seed ne '';
my ($stdout, $stderr) = ('', '');
my $fuzz = IPC::Run::start(\@cmd, '>', \$stdout, '2>', \$stderr,
	IPC::Run::timeout($seconds + 600));
my $started = Time::HiRes::time();
while ($fuzz->pumpable)
{
	$fuzz->pump_nb;
	Time::HiRes::sleep(1);
	my $t = sprintf('%.0f s', Time::HiRes::time() - $started);
	check_invariants("during the fuzz, at $t");
	check_stale_claims();
}
$fuzz->finish;
is($fuzz->result(0), 0, 'the fuzzer ran to its end') or diag($stderr);
my ($json_line) = reverse grep { /^\{/ } split /\n/, $stdout;
# The whole report (with the sessions the watchdog saw running long) stays
# in the log directory.
PostgreSQL::Test::Utils::append_to_file(
	"$PostgreSQL::Test::Utils::log_path/019_fuzz_report.json", ($json_line // '') . "\n");
my $report = eval { JSON::PP::decode_json($json_line // '') };
ok($report, 'the fuzzer printed its figures') or BAIL_OUT("no report: $stdout\n$stderr");

# ---- the figures ----
my $functions = $report->{functions};
note(sprintf('seed %d (PG_WF_FUZZ_SEED=%d reruns it), %.1f s, %d clients: %d calls, %d errors',
	$report->{seed}, $report->{seed}, $report->{seconds}, $report->{clients},
	$report->{calls}, $report->{errors}));
note(sprintf('backends terminated: %d clients, %d reapers; connections lost: %d ours, %d not ours;'
	  . ' %d calls as wf_fuzz_user; slowest call %.2f s',
	$report->{terminated}{clients}, $report->{terminated}{reapers},
	$report->{connections_lost}{ours}, $report->{connections_lost}{unexpected},
	$report->{calls_as_role}, $report->{slowest_call_s}));
note('transactions: '
	  . join(', ', map { "$_ $report->{transactions}{$_}" } sort keys %{ $report->{transactions} }));
for my $fn (sort keys %$functions)
{
	my $f = $functions->{$fn};
	my @codes = sort keys %{ $f->{errors} };
	note(sprintf('%-22s %6d calls, %2d SQLSTATEs: %s; results: %s', $fn, $f->{calls},
		scalar(@codes), join(' ', map { "$_ x$f->{errors}{$_}" } @codes) || '-',
		join(' ', map { "$_ x$f->{outcomes}{$_}" } sort keys %{ $f->{outcomes} }) || '-'));
}
note("invariant checks while the fuzzer ran: $checks; sessions that ran > 5 s: "
	  . scalar(@{ $report->{long_running} }));

# ---- what the fuzzer saw ----
cmp_ok($report->{calls}, '>', 500, 'the fuzzer made hundreds of calls');
my @missed = grep { ($functions->{$_}{calls} // 0) == 0 } sort keys %$functions;
is(scalar(keys %$functions), 34, 'the fuzzer knows 34 functions');
is_deeply(\@missed, [], 'every wf_* function was called');
# The calls were valid enough to take the real paths.
my %outcome = map { $_ => $functions->{$_}{outcomes} } keys %$functions;
ok(($outcome{wf_claim}{'jobs=1'} // 0) + ($outcome{wf_claim}{'jobs>1'} // 0) > 0,
	'claims took jobs');
ok(($outcome{wf_complete}{True} // 0) > 0, 'completions with the right token succeeded');
ok((grep { /^completed=True/ } keys %{ $outcome{wf_complete_and_claim} }),
	'wf_complete_and_claim completed jobs');
ok(($outcome{wf_heartbeat}{True} // 0) > 0, 'heartbeats held');
ok(($outcome{wf_checkpoint}{recorded} // 0) > 0, 'checkpoints were recorded');
ok(($outcome{wf_submit}{value} // 0) > 0, 'workflows were submitted');
ok((grep { $functions->{$_}{errors}{42501} } keys %$functions), 'the role was denied (42501)');
ok(($outcome{wf_start_child}{value} // 0) > 0, 'children were started');
ok(($outcome{wf_complete_with_steps}{True} // 0) > 0, 'steps were added by wf_complete_with_steps');
ok(($outcome{wf_signal_with_start}{value} // 0) > 0, 'wf_signal_with_start started or signalled');
ok(($outcome{wf_progress}{True} // 0) > 0, 'progress was recorded');
cmp_ok($report->{terminated}{clients}, '>', 0, 'client backends were terminated')
  if $seconds >= 10;

# XX000 and its kin. If this fails, each entry names the call (SQL and
# arguments), its error, and the client's last calls before it; a hang
# comes with the sessions that ran long meanwhile (the watchdog's view).
#
# Bugs this fuzzer found, fixed since: XX000 "tuple concurrently updated"
# from concurrent wf_grant/wf_revoke (they now take turns), and hangs of
# the calls waiting on the rows of thousands of claims the reaper recovered
# at once, in a quadratic plan (now linear).
my @unexpected = @{ $report->{unexpected} };
is(scalar(@unexpected), 0,
	'no internal error (XX000, classes XX and 58), lost connection or hang')
  or diag(JSON::PP->new->canonical->pretty->encode(\@unexpected)),
  diag('sessions that ran long: '
	  . JSON::PP->new->canonical->pretty->encode($report->{long_running}));
is($report->{connections_lost}{unexpected}, 0, 'no connection lost but those we terminated');

# ---- after the fuzz: clients gone, a sweep ----
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name LIKE 'wf_fuzz_%'"),
	'the fuzzer\'s sessions are gone');
ok( $node->poll_query_until('postgres',
		"SELECT wf_sweep() >= 0 AND NOT EXISTS (SELECT 1 FROM wf.claim WHERE queue <> '')"),
	'after a sweep no claim is left but the sentinel')
  or diag($node->safe_psql('postgres', 'SELECT * FROM wf.claim LIMIT 20'));
# The worker settles the releases left to it (while the fuzz ran, a
# blocked job could wait on a release owed alone; none is left now), and
# delivers the children's outcomes left to it.
ok($node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM wf.release_debt'),
	'the worker settled every release owed')
  or diag($node->safe_psql('postgres', 'SELECT * FROM wf.release_debt LIMIT 20'));
$node->poll_query_until('postgres',
	'SELECT wf_sweep() >= 0 AND NOT EXISTS (SELECT 1 FROM wf.child WHERE status IS NOT NULL AND NOT delivered)');
check_invariants('after the fuzz and a sweep');
check_final_invariants();
# "no blocked job waits for a failed or cancelled one" caught wf_retry(A)
# bringing back, blocked, a job whose other parent B had failed too (it is
# now cancelled again by B; dependencies.sql).
for my $name (@names, @final_names)
{
	ok(!$broken{$name}, "invariant $name") or diag(join("\n", @{ $broken{$name} }));
}
ok(!$broken{'the invariant check ran'}, 'the invariant checks ran')
  or diag($broken{'the invariant check ran'});
is(join("\n", sort keys %left_behind), '',
	'no claim of a dead session or an expired lease was left for more than 5 s');
note($node->safe_psql('postgres',
	q{SELECT 'jobs: ' || string_agg(status || ' ' || n, ', ' ORDER BY status)
	    FROM (SELECT status, count(*) AS n FROM wf.jobs GROUP BY status) s}));
note($node->safe_psql('postgres',
	q{SELECT 'children: ' || count(*) || ', ' || count(*) FILTER (WHERE delivered) || ' delivered ('
	         || coalesce(string_agg(DISTINCT status, ', '), '-') || '); steps added at run time: '
	         || (SELECT count(*) FROM wf.job WHERE step_name LIKE 'f%\_%\_%')
	    FROM wf.child}));

# ---- the server log: no crash ----
my $log = slurp_file($node->logfile);
my @crashes = grep {
	/PANIC|server process \(PID \d+\) (was terminated by signal|exited with exit code)|terminating any other active server processes/
} split /\n/, $log;
is(join("\n", @crashes[0 .. ($#crashes < 19 ? $#crashes : 19)]), '', 'no backend crashed');
my @internal = grep { /(ERROR|FATAL|PANIC):  (XX|58)[0-9A-Z]{3}:/ } split /\n/, $log;
is(join("\n", @internal[0 .. ($#internal < 19 ? $#internal : 19)]), '',
	'the log has no error of class XX or 58');

# ---- the server still works ----
my $id = $node->safe_psql('postgres', q{SELECT wf_enqueue('fz_final', '{"last": true}')});
my $claimed = $node->safe_psql('postgres', q{
SELECT id, attempt FROM wf_claim('fz_final') \gset c_
SELECT wf_complete('fz_final', :c_id, :c_attempt, '{"ok": true}');
SELECT :c_id});
is($claimed, "t\n$id", 'a job is enqueued, claimed and completed after the fuzz');
is($node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE queue = 'fz_final' AND id = $id"),
	'done', 'and is done');

done_testing();
