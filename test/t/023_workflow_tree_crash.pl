# A three-level tree of workflows (1.6's child workflows) run by worker
# processes that die at random moments, through a crash restart and an
# immediate shutdown of the server. test/flow/tree.py is the worker; see its
# docstring for the tree. In short, per root workflow: root steps p0.. each
# start child workflows with wf_start_child and park in wf_await_children;
# each child's one step `plan` fans out at run time (wf_complete_with_steps)
# into steps part0.. and a `gather` after them; each part starts grandchild
# workflows (steps a, b, and z after both) and parks in wf_await_children
# too; the root's `final` runs after its p steps. Every completion writes
# its side effect in the same transaction as wf_complete.
#
# The chaos, while the workers run: every PG_WF_TREE_KILL_EVERY (0.5)
# seconds or so, a worker process is SIGKILLed (2 in 3) or its backend is
# ended with pg_terminate_backend (1 in 3); workers also SIGKILL themselves
# at chosen moments (after a claim, between two wf_start_child, after
# wf_await_children, inside a completion's transaction: PG_WF_TREE_SELF_KILL
# (0.01) is the probability at each), and PG_WF_TREE_CRASH_SPAWNS (15)
# percent of the spawning steps certainly die after their first child; a
# backend is SIGKILLed (a crash restart of the whole server) when the
# fractions of the steps in PG_WF_TREE_CRASH_AT ('0.15,0.7') are done, and
# the server is stopped in immediate mode and started again at
# PG_WF_TREE_IMMEDIATE_AT ('0.4'). Dead workers are replaced; live ones
# connect again by themselves, as real ones do.
#
# Then: every step of every workflow ended done; each completion's side
# effect happened exactly once, written by the attempt that completed the
# step; the fan-out added its steps once and every child was started once
# per name (a step re-run after a crash got the same child back from
# wf_start_child); every wf.child row is done and delivered; every parent
# step was resumed with its children's outcomes (the claim that completed it
# had one "wf:child:<name>" per child, done, naming the right workflow) and
# its result says so; each root's `final` counted every leaf of its tree; no
# attempt was handed out twice, no attempt's end came after a later attempt
# was claimed, no live worker found its token stale; no backend crashed on
# its own and the log has no error of class XX or 58.
#
# Sizes: PG_WF_TREE_ROOTS (4) root workflows of PG_WF_TREE_ROOT_STEPS (2)
# steps, PG_WF_TREE_CHILDREN (3) children per root step, PG_WF_TREE_PARTS
# (3) parts per child, PG_WF_TREE_GRANDCHILDREN (2) grandchildren per part;
# PG_WF_TREE_WORKERS (4) worker processes, PG_WF_TREE_WORK_MS (80) the
# average work of a leaf, PG_WF_TREE_SECONDS (30) the longest the random
# kills go on (they stop when the trees are done), PG_WF_TREE_DRAIN_SECONDS
# (60) how much longer the trees may take to finish, PG_WF_TREE_SEED the seed
# of the workers' choices (random, printed). Workers' stderr is in
# tmp_check/log/tree_worker_*.err. About 20 s in all on 2 cores.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run ();
use JSON::PP ();
use POSIX ':sys_wait_h';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use WfTap;

my $t_start = time();
my $roots = $ENV{PG_WF_TREE_ROOTS} // 4;
my $root_steps = $ENV{PG_WF_TREE_ROOT_STEPS} // 2;
my $children = $ENV{PG_WF_TREE_CHILDREN} // 3;
my $parts = $ENV{PG_WF_TREE_PARTS} // 3;
my $grandchildren = $ENV{PG_WF_TREE_GRANDCHILDREN} // 2;
my $n_workers = $ENV{PG_WF_TREE_WORKERS} // 4;
my $work_ms = $ENV{PG_WF_TREE_WORK_MS} // 80;
my $seconds = $ENV{PG_WF_TREE_SECONDS} // 30;
my $kill_every = $ENV{PG_WF_TREE_KILL_EVERY} // 0.5;
my $self_kill = $ENV{PG_WF_TREE_SELF_KILL} // 0.01;
my $crash_spawns = $ENV{PG_WF_TREE_CRASH_SPAWNS} // 15;
my @crash_at = split /,/, ($ENV{PG_WF_TREE_CRASH_AT} // '0.15,0.7');
my @immediate_at = split /,/, ($ENV{PG_WF_TREE_IMMEDIATE_AT} // '0.4');
my $drain_s = $ENV{PG_WF_TREE_DRAIN_SECONDS} // 60;
my $seed = $ENV{PG_WF_TREE_SEED} // int(rand(2**31));
srand($seed);
diag("seed $seed (PG_WF_TREE_SEED)");

# The expected sizes of each root's tree.
my $child_wfs = $root_steps * $children;
my $grand_wfs = $child_wfs * $parts * $grandchildren;
my $jobs_per_root = ($root_steps + 1) + $child_wfs * ($parts + 2) + $grand_wfs * 3;
my $leaves_per_root = 1 + $child_wfs * (1 + 3 * $parts * $grandchildren);
my $spawns_per_root = $root_steps + $child_wfs * $parts;
my $jobs = $roots * $jobs_per_root;
my $workflows = $roots * (1 + $child_wfs + $grand_wfs);

my $node = wf_node('tree', sweep_interval => '200ms', conf => q{
max_connections = 60
log_statement = 'none'
client_connection_check_interval = '100ms'
log_error_verbosity = verbose
log_min_messages = warning
});
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');

# Kills spend attempts: none may run out. Recovered jobs are retried soon.
$node->safe_psql('postgres', q{
SELECT wf_configure_queue(q, max_attempts => 1000, backoff_base => '10 ms', backoff_max => '50 ms')
  FROM unnest(ARRAY['tree.root', 'tree.mid', 'tree.leaf']) q;
CREATE TABLE tree_claim (seq bigserial PRIMARY KEY, queue text NOT NULL, id bigint NOT NULL,
                         attempt int NOT NULL, workflow_id uuid, step_name text, payload jsonb,
                         inputs jsonb, events jsonb, worker text NOT NULL,
                         claimed_at timestamptz NOT NULL);
CREATE TABLE tree_end (queue text NOT NULL, id bigint NOT NULL, attempt int NOT NULL,
                       kind text NOT NULL, outcome text, end_before timestamptz NOT NULL,
                       worker text NOT NULL);
CREATE TABLE tree_child_start (parent_queue text NOT NULL, parent_id bigint NOT NULL,
                               attempt int NOT NULL, name text NOT NULL, workflow_id uuid,
                               called_before timestamptz NOT NULL, worker text NOT NULL);
-- No unique constraint: a second effect of a step must show, not fail.
CREATE TABLE tree_effect (queue text NOT NULL, job_id bigint NOT NULL, attempt int NOT NULL,
                          workflow_id uuid, step_name text, kind text NOT NULL, inputs jsonb,
                          result jsonb, worker text NOT NULL,
                          at timestamptz NOT NULL DEFAULT clock_timestamp());
});

# ---- first, without chaos: a child workflow that fans out ----
# A parent parked in wf_await_children; its child's only step completes
# with wf_complete_with_steps. The child is not over: its parent must not
# hear from it until the added step has ended, and the added step belongs
# to the child (child_of) like the rest of it.
$node->safe_psql('postgres', q{
CREATE TABLE fan_probe AS SELECT NULL::bigint AS pid, NULL::int AS patt, NULL::uuid AS child;
SELECT wf_submit('{"name": "probe", "queue": "probe.parent", "steps": [{"name": "p"}]}');
UPDATE fan_probe SET (pid, patt) = (SELECT id, attempt FROM wf_claim('probe.parent'));
UPDATE fan_probe SET child = wf_start_child('probe.parent', pid, patt, 'c',
  '{"queue": "probe.child", "steps": [{"name": "plan"}]}');
SELECT wf_await_children('probe.parent', pid, patt) FROM fan_probe;
SELECT wf_complete_with_steps(queue, id, attempt, '{"planned": true}',
                              '[{"name": "added", "after": ["plan"]}]')
  FROM wf_claim('probe.child');
});
is($node->safe_psql('postgres', q{
SELECT string_agg(step_name || ' ' || status || ' '
                  || coalesce((child_of = pid)::text, 'no child_of'), ', ' ORDER BY id)
  FROM wf.jobs, fan_probe WHERE workflow_id = child}),
	'plan done true, added pending true',
	"a child's step added by wf_complete_with_steps is pending and the child's (child_of)");
is($node->safe_psql('postgres', q{
SELECT coalesce(c.status, 'unfinished') || ', parent ' || j.status || ', '
       || coalesce(j.events::text, 'no events')
  FROM wf.child c, wf.jobs j, fan_probe f
 WHERE c.workflow_id = f.child AND j.queue = 'probe.parent' AND j.id = f.pid}),
	'unfinished, parent waiting, no events',
	'the parent is still waiting: its child is not over while its added step is pending');
$node->safe_psql('postgres', q{
SELECT wf_complete(queue, id, attempt, '{"added": 1}') FROM wf_claim('probe.child')});
ok( $node->poll_query_until('postgres', q{
SELECT status = 'pending' FROM wf.jobs j, fan_probe f
 WHERE j.queue = 'probe.parent' AND j.id = f.pid}),
	'when the added step ends, the parent is woken');
is($node->safe_psql('postgres', q{
SELECT c.status || ' ' || (j.events->'wf:child:c'->>'status') || ' '
       || (j.events->'wf:child:c'->'results')::text
  FROM wf.child c, wf.job j, fan_probe f
 WHERE c.workflow_id = f.child AND j.queue = 'probe.parent' AND j.id = f.pid}),
	'done done {"added": {"added": 1}}',
	"with the child's outcome: done, the added (final) step's result");

my $dsn = sprintf('host=%s port=%d dbname=postgres', $node->host, $node->port);
my $driver = "$FindBin::RealBin/../flow/tree.py";
my $log_dir = $PostgreSQL::Test::Utils::log_path;

sub rows
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

# ---- the trees ----
my $submit = "/usr/bin/python3 $driver submit --dsn '$dsn' --roots $roots"
  . " --root-steps $root_steps --children $children --parts $parts"
  . " --grandchildren $grandchildren";
my $submitted = `$submit`;
is($?, 0, 'the root workflows were submitted') or BAIL_OUT("submit failed: $submitted");
my @root_ids = @{ JSON::PP::decode_json($submitted)->{roots} };
is(scalar(@root_ids), $roots, "$roots root workflows");
my $root_list = join(',', map { "'$_'::uuid" } @root_ids);
my $roots_done_sql = "SELECT count(*) = $roots FROM wf.workflows"
  . " WHERE workflow_id IN ($root_list) AND status <> 'running'";

# ---- the workers ----
my (@slots, %exit, %generation);

sub start_worker
{
	my ($slot) = @_;
	my $g = ++$generation{$slot};
	my $name = "tree_w$slot.$g";
	my $err = "$log_dir/tree_worker_$name.err";
	open(my $fh, '>', $err) or die "cannot create $err: $!";
	close $fh;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDIN, '<', '/dev/null');
		open(STDOUT, '>', '/dev/null');
		open(STDERR, '>', $err);
		exec('/usr/bin/python3', $driver, 'worker', '--dsn', $dsn, '--name', $name,
			'--seed', $seed, '--work-ms', $work_ms, '--self-kill', $self_kill,
			'--crash-spawns', $crash_spawns)
		  or POSIX::_exit(127);
	}
	$slots[$slot] = { name => $name, pid => $pid, err => $err };
	return;
}

# Replaces the workers that died (killed, or by their own hand).
sub replace_dead
{
	for my $slot (0 .. $#slots)
	{
		my $w = $slots[$slot];
		next unless $w;
		my $r = waitpid($w->{pid}, WNOHANG);
		next if $r == 0;
		$exit{ $w->{name} } = $? & 127 ? 'signal ' . ($? & 127) : 'exit ' . ($? >> 8);
		start_worker($slot);
	}
	return;
}

# A query while the server may be going away or coming back: (exit code,
# output). The SQL goes in -c, not on stdin (a psql that cannot connect
# exits before reading it, and the write would fail).
sub try_sql
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', $sql ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	};
	chomp $out;
	return ($ok ? 0 : 1, $out);
}

sub server_up
{
	my $deadline = time() + 60;
	while (time() < $deadline)
	{
		my ($ret, $out) = try_sql('SELECT 1');
		return 1 if $ret == 0 && $out eq '1';
		sleep(0.1);
	}
	return 0;
}

sub backend_of
{
	my ($w) = @_;
	my ($ret, $out) =
	  try_sql("SELECT pid FROM pg_stat_activity WHERE application_name = '$w->{name}'");
	return $ret == 0 && $out =~ /^(\d+)$/ ? $1 : undef;
}

sub unfinished_jobs
{
	my ($ret, $out) =
	  try_sql("SELECT count(*) FROM wf.job WHERE queue LIKE 'tree.%' AND status <> 'done'");
	return $ret == 0 ? $out : 'an unknown number of';
}

start_worker($_) for 0 .. $n_workers - 1;

# ---- the chaos ----
# A crash restart: SIGKILL of a worker's backend (the postmaster then ends
# every session and reinitialises). Done once the log says so: the backend
# picked may have been on its way out already.
sub log_since
{
	my ($offset) = @_;
	open(my $fh, '<', $node->logfile) or return '';
	seek($fh, $offset, 0);
	local $/;
	my $text = <$fh> // '';
	close $fh;
	return $text;
}

sub crash_restart
{
	my $offset = -s $node->logfile;
	for my $try (1 .. 20)
	{
		my ($ret, $pid) = try_sql(q{
SELECT pid FROM pg_stat_activity
 WHERE backend_type = 'client backend' AND application_name LIKE 'tree_w%'
 ORDER BY random() LIMIT 1});
		if ($ret == 0 && $pid =~ /^\d+$/ && kill('KILL', $pid))
		{
			my $deadline = time() + 3;
			while (time() < $deadline)
			{
				return 1
				  if log_since($offset) =~ /all server processes terminated; reinitializing/;
				sleep(0.05);
			}
		}
		note("crash restart: try $try (backend " . ($pid || 'none') . ') did not restart the server');
		sleep(0.1);
	}
	return 0;
}

my %kills = (worker => 0, terminate => 0, crash => 0, immediate => 0);
my @mid_tree;    # steps unfinished at each crash restart and immediate stop
my $t0 = time();
my @events = sort { $a->[0] <=> $b->[0] } ((map { [ $_, 'crash' ] } @crash_at),
	(map { [ $_, 'immediate' ] } @immediate_at));
my $next_kill = $t0 + $kill_every * (0.5 + rand());
my $next_check = 0;
my $drained = 0;
my $progress = 0;
my $chaos_s;
# Random kills for $seconds at most; the crash restarts and the immediate
# stop when their share of the steps is done, whenever that is; then the
# workers finish (dead ones still replaced), within $drain_s more.
while (time() < $t0 + $seconds + $drain_s)
{
	sleep(0.05);
	replace_dead();
	if (time() >= $next_check)
	{
		$next_check = time() + 0.25;
		my ($ret, $out) = try_sql(qq{
SELECT CASE WHEN ($roots_done_sql)
                 AND count(*) FILTER (WHERE status IN ('blocked', 'pending', 'waiting')) = 0
            THEN 't' ELSE 'f' END || ' ' || count(*) FILTER (WHERE status = 'done')
  FROM wf.job WHERE queue LIKE 'tree.%'});
		if ($ret == 0 && $out =~ /^(t|f) (\d+)$/)
		{
			$progress = $2 / $jobs;
			if ($1 eq 't')
			{
				$drained = 1;
				last;
			}
		}
	}
	if (@events && $progress >= $events[0][0])
	{
		my $what = (shift @events)->[1];
		my $left = unfinished_jobs();
		if ($what eq 'crash')
		{
			my $crashed = crash_restart();
			ok($crashed, 'a backend SIGKILLed: the server went through a crash restart');
			$kills{crash}++ if $crashed;
			push @mid_tree, "crash restart with $left steps unfinished";
			ok(server_up(), 'the server is back after the crash restart');
		}
		else
		{
			$node->stop('immediate');
			$kills{immediate}++;
			push @mid_tree, "immediate stop with $left steps unfinished";
			sleep(0.5);
			$node->start;
		}
		next;
	}
	next if $kill_every <= 0 || time() < $next_kill;
	if (time() > $t0 + $seconds)
	{
		$chaos_s //= time() - $t0;
		next;
	}
	$next_kill = time() + $kill_every * (0.5 + rand());
	my $w = $slots[ int(rand($n_workers)) ];
	if (rand() < 2 / 3)
	{
		kill 'KILL', $w->{pid};
		$kills{worker}++;
	}
	else
	{
		my $pid = backend_of($w);
		next unless $pid;
		try_sql("SELECT pg_terminate_backend($pid)");
		$kills{terminate}++;
	}
}
my $run_s = time() - $t0;
$chaos_s //= $run_s;
diag(sprintf('run: %.1f s (random kills for %.1f s); %d workers SIGKILLed, %d backends'
	  . ' terminated, %d crash restarts, %d immediate stops', $run_s, $chaos_s,
	$kills{worker}, $kills{terminate}, $kills{crash}, $kills{immediate}));
diag($_) for @mid_tree;
ok($kills{crash} >= 1, 'a backend was SIGKILLed: a crash restart');
ok($kills{immediate} >= 1, 'the server was stopped in immediate mode and started again');
ok($kills{worker} + $kills{terminate} >= 3, 'workers were killed at random');
is(scalar(@events), 0, 'every crash restart and immediate stop planned took place');
ok(!grep({ / 0 steps unfinished/ } @mid_tree), 'each crash and stop hit the trees while they ran');
ok($drained, 'every root workflow and every step of the trees finished')
  or diag("stuck after $run_s s:\n" . rows(q{
SELECT string_agg(format('%s/%s %s %s: %s attempt %s waiting_for %s events %s', j.queue, j.id,
                         j.workflow_id, j.step_name, j.status, j.attempt, j.waiting_for,
                         j.events), E'\n' ORDER BY j.id)
  FROM wf.jobs j WHERE j.queue LIKE 'tree.%' AND j.status <> 'done'})
	  . "\nwf.child not delivered:\n" . rows(q{
SELECT string_agg(format('%s/%s %s %s status %s', parent_queue, parent_id, name, workflow_id,
                         status), E'\n') FROM wf.child
 WHERE parent_queue LIKE 'tree.%' AND (NOT delivered OR status IS NULL)})
	  . "\nwf.event_wait:\n" . rows(q{
SELECT string_agg(format('%s/%s attempt %s %s', queue, id, attempt, event), E'\n')
  FROM wf.event_wait WHERE queue LIKE 'tree.%'}));

# The workers stop (SIGTERM: each finishes its job in hand; one that had not
# yet set up its handler ends by the signal).
my %stopped;
kill 'TERM', $_->{pid} for @slots;
for my $w (@slots)
{
	my $deadline = time() + 20;
	my $r = 0;
	while (($r = waitpid($w->{pid}, WNOHANG)) == 0 && time() < $deadline) { sleep(0.05); }
	if ($r == 0)
	{
		kill 'KILL', $w->{pid};
		waitpid($w->{pid}, 0);
		$exit{ $w->{name} } = 'did not stop';
	}
	else
	{
		$exit{ $w->{name} } = $? & 127 ? 'signal ' . ($? & 127) : 'exit ' . ($? >> 8);
		$stopped{ $w->{name} } = 1;
	}
}
my (@unexpected, $self_kills, $lost);
for my $name (sort keys %exit)
{
	my $text = slurp_file("$log_dir/tree_worker_$name.err");
	push @unexpected, grep { /^UNEXPECTED|Traceback/ } split /\n/, $text;
	$self_kills += () = $text =~ /^SELFKILL/mg;
	$lost += () = $text =~ /connection lost/g;
	push @unexpected, "$name: $exit{$name}"
	  unless $exit{$name} =~ /^(signal 9|exit 0)$/
	  || ($stopped{$name} && $exit{$name} eq 'signal 15');
}
diag(sprintf('%d worker processes; %d killed themselves at a chosen moment; %d lost their'
	  . ' connection and connected again', scalar(keys %exit), $self_kills, $lost));
is(join("\n", @unexpected), '', 'no worker saw anything unexpected (an error, a stale token,'
	  . ' a failed child, wrong inputs) or ended other than killed or stopped');
cmp_ok($self_kills, '>', 0, 'workers killed themselves at chosen moments') if $self_kill > 0;

# ---- every step done, once ----
is( rows(qq{SELECT status || ' ' || count(*) FROM wf.workflows
	          WHERE workflow_id IN ($root_list) GROUP BY status}),
	"done $roots", 'every root workflow is done');
is( rows(q{SELECT coalesce(string_agg(status || ' ' || n, ', '), '')
	         FROM (SELECT status, count(*) AS n FROM wf.job WHERE queue LIKE 'tree.%'
	                GROUP BY 1 ORDER BY 1) s}),
	"done $jobs", "all $jobs steps of the trees are done, none in another state");
is(rows(q{SELECT count(*) FROM wf.workflow w WHERE EXISTS
	      (SELECT 1 FROM wf.job j WHERE j.workflow_id = w.id AND j.queue LIKE 'tree.%')}),
	$workflows, "$workflows workflows: the roots, their children and grandchildren, no more");
is( rows(q{SELECT coalesce(string_agg(workflow_id || ' ' || status, ', '), '')
	         FROM wf.workflows WHERE status <> 'done' AND workflow_id IN
	              (SELECT workflow_id FROM wf.job WHERE queue LIKE 'tree.%')}),
	'', 'every workflow is done');
is( rows(q{SELECT count(*) FROM wf.job
	        WHERE queue LIKE 'tree.%' AND step_name ~ '^part[0-9]+$'}),
	$roots * $child_wfs * $parts, 'each plan added its parts once (wf_complete_with_steps)');
is( rows(q{SELECT count(*) FROM wf.job WHERE queue LIKE 'tree.%' AND step_name = 'gather'}),
	$roots * $child_wfs, 'and one gather each');

is( rows(q{SELECT count(*) || ' ' || count(DISTINCT job_id) FROM tree_effect}),
	"$jobs $jobs", 'one side effect per step: none twice, none missing');
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s %s: %s effects, done by attempt %s', j.queue, j.id,
                                  j.step_name, e.n, j.attempt), E'\n'), '')
  FROM wf.job j
  LEFT JOIN (SELECT job_id, count(*) AS n, max(attempt) AS attempt, max(result::text) AS result
               FROM tree_effect GROUP BY 1) e ON e.job_id = j.id
 WHERE j.queue LIKE 'tree.%'
   AND (e.n IS DISTINCT FROM 1 OR e.attempt IS DISTINCT FROM j.attempt
        OR e.result::jsonb IS DISTINCT FROM j.result)}),
	'', "each step's side effect was written by the attempt that completed it, with its result");
my $leaves = rows(q{SELECT count(*) FROM tree_effect WHERE kind = 'leaf'});
is($leaves, $roots * $leaves_per_root, "$leaves leaf steps, each with its effect");
is( rows(q{
SELECT coalesce(string_agg(format('%s %s: inputs %s', e.workflow_id, e.step_name, e.inputs),
                           E'\n'), '')
  FROM tree_effect e JOIN wf.job j ON j.id = e.job_id
 WHERE e.kind = 'leaf'
   AND coalesce((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(
                   CASE WHEN jsonb_typeof(e.inputs) = 'object' THEN e.inputs END) k), '{}')
       IS DISTINCT FROM coalesce((SELECT array_agg(p.step_name ORDER BY p.step_name)
                                    FROM wf.job p WHERE p.id = ANY (j.depends_on)), '{}')}),
	'', "every leaf's inputs are its predecessors' results");
is( rows(qq{
SELECT string_agg((result->>'n'), ',' ORDER BY workflow_id) FROM wf.job
 WHERE workflow_id IN ($root_list) AND step_name = 'final'}),
	join(',', ($leaves_per_root) x $roots),
	"each root's final step counted the $leaves_per_root leaves of its tree through every level");

# ---- children: started once per name, done, delivered ----
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s %s: %s', s.parent_queue, s.parent_id, s.name, s.ids),
                           E'\n'), '')
  FROM (SELECT parent_queue, parent_id, name, array_agg(DISTINCT workflow_id) AS ids
          FROM tree_child_start GROUP BY 1, 2, 3) s
  LEFT JOIN wf.child c ON c.parent_queue = s.parent_queue AND c.parent_id = s.parent_id
                      AND c.name = s.name
 WHERE s.ids IS DISTINCT FROM ARRAY[c.workflow_id]}),
	'', 'every wf_start_child of a name returned the one child wf.child has for it');
my $restarted = rows(q{
SELECT count(*) FROM (SELECT 1 FROM tree_child_start GROUP BY parent_queue, parent_id, name
                       HAVING count(DISTINCT attempt) > 1) x});
diag("children started again by a later attempt of their parent (same child back): $restarted");
cmp_ok($restarted, '>', 0, 'some steps re-ran after a crash and started their children again')
  if $crash_spawns > 0;
is(rows(q{SELECT count(*) FROM wf.child WHERE parent_queue LIKE 'tree.%'}),
	$roots * ($child_wfs + $grand_wfs),
	'one wf.child row per child');
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s %s %s: %s delivered %s', parent_queue, parent_id, name,
                                  workflow_id, status, delivered), E'\n'), '')
  FROM wf.child
 WHERE parent_queue LIKE 'tree.%'
   AND (status IS DISTINCT FROM 'done' OR NOT delivered OR finished_at IS NULL
        OR outcome->>'status' IS DISTINCT FROM 'done'
        OR (outcome->>'workflow_id')::uuid IS DISTINCT FROM workflow_id)}),
	'', 'every wf.child row: done, its outcome recorded and delivered');
is( rows(q{
SELECT coalesce(string_agg(format('%s %s', c.workflow_id, j.child_of), E'\n'), '')
  FROM wf.child c JOIN wf.job j ON j.workflow_id = c.workflow_id
 WHERE c.parent_queue LIKE 'tree.%' AND j.child_of IS DISTINCT FROM c.parent_id}),
	'', "every child's steps name their parent job (child_of)");
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s %s: outcome results %s, final steps %s', c.parent_queue,
                                  c.parent_id, c.name, c.outcome->'results', f.results), E'\n'),
                '')
  FROM wf.child c
  LEFT JOIN LATERAL (SELECT jsonb_object_agg(j.step_name, j.result) AS results FROM wf.job j
                      WHERE j.workflow_id = c.workflow_id AND NOT j.has_dependents) f ON true
 WHERE c.parent_queue LIKE 'tree.%' AND c.outcome->'results' IS DISTINCT FROM f.results}),
	'', "every child's outcome holds the results of its final steps");
# A parent's claim sees a child's outcome only after the child's last step
# ended (finished_at is its transaction's start, claimed_at a clock read in
# a later transaction).
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s attempt %s, claimed at %s, had the outcome of %s,'
                                  ' whose last step ended at %s', c.queue, c.id, c.attempt,
                                  c.claimed_at, ch.name, l.last), E'\n'), '')
  FROM tree_claim c
  JOIN LATERAL jsonb_each(c.events) e ON e.key LIKE 'wf:child:%'
  JOIN wf.child ch ON ch.parent_queue = c.queue AND ch.parent_id = c.id
                  AND 'wf:child:' || ch.name = e.key
  JOIN LATERAL (SELECT max(j.finished_at) AS last FROM wf.job j
                 WHERE j.workflow_id = ch.workflow_id) l ON true
 WHERE jsonb_typeof(c.events) = 'object' AND l.last >= c.claimed_at}),
	'', "no parent was resumed with a child's outcome before the child's last step ended");

# The claim that completed each spawning step: its events held one outcome
# per child, done, of the right workflow, and nothing of other children.
my $spawns = $roots * $spawns_per_root;
is( rows(q{
SELECT count(*) FROM wf.job j
 WHERE j.queue LIKE 'tree.%' AND j.payload->>'role' = 'spawn'}),
	$spawns, "$spawns steps started children");
is( rows(q{
WITH s AS (
  SELECT j.queue, j.id, j.step_name, j.result, c.events
    FROM wf.job j
    JOIN tree_claim c ON c.queue = j.queue AND c.id = j.id AND c.attempt = j.attempt
   WHERE j.queue LIKE 'tree.%' AND j.payload->>'role' = 'spawn'),
got AS (
  SELECT s.id, substr(e.key, length('wf:child:') + 1) AS name, e.value
    FROM s, jsonb_each(s.events) e WHERE e.key LIKE 'wf:child:%'),
bad AS (
  SELECT s.queue, s.id, s.step_name,
         (SELECT array_agg(name ORDER BY name) FROM got WHERE got.id = s.id) AS got,
         (SELECT array_agg(name ORDER BY name) FROM wf.child c
           WHERE c.parent_queue = s.queue AND c.parent_id = s.id) AS want,
         (SELECT count(*) FROM got JOIN wf.child c ON c.parent_queue = s.queue
                 AND c.parent_id = s.id AND c.name = got.name
           WHERE got.id = s.id AND got.value->>'status' = 'done'
             AND (got.value->>'workflow_id')::uuid = c.workflow_id
             AND got.value->'results' = c.outcome->'results') AS good
    FROM s)
SELECT coalesce(string_agg(format('%s/%s %s: events had %s, children %s, %s good', queue, id,
                                  step_name, got, want, good), E'\n'), '')
  FROM bad
 WHERE got IS DISTINCT FROM want OR want IS NULL OR good <> cardinality(want)}),
	'', "every spawning step was resumed with one done outcome per child in its claim's events");
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s %s: result %s', j.queue, j.id, j.step_name, j.result),
                           E'\n'), '')
  FROM wf.job j
 WHERE j.queue LIKE 'tree.%' AND j.payload->>'role' = 'spawn'
   AND (j.result->'children' IS NULL
        OR (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(j.result->'children') k)
           IS DISTINCT FROM (SELECT array_agg(c.name ORDER BY c.name) FROM wf.child c
                              WHERE c.parent_queue = j.queue AND c.parent_id = j.id)
        OR EXISTS (
             SELECT 1 FROM wf.child c
              WHERE c.parent_queue = j.queue AND c.parent_id = j.id
                AND ((j.result->'children'->c.name->>'workflow_id')::uuid
                       IS DISTINCT FROM c.workflow_id
                     OR j.result->'children'->c.name->>'status' IS DISTINCT FROM 'done'
                     OR (j.result->'children'->c.name->>'n')::int IS DISTINCT FROM
                        (SELECT sum((f.result->>'n')::int) FROM wf.job f
                          WHERE f.workflow_id = c.workflow_id AND NOT f.has_dependents)))
        OR (j.result->>'n')::int IS DISTINCT FROM
           (SELECT sum((f.result->>'n')::int) FROM wf.child c JOIN wf.job f
                   ON f.workflow_id = c.workflow_id AND NOT f.has_dependents
             WHERE c.parent_queue = j.queue AND c.parent_id = j.id))}),
	'', "every spawning step's result is its children's outcomes (ids, done, their results)");
# A step whose children all ended while it was away (killed after starting
# the last one) is completed at its next claim without parking: legitimate,
# and rare. The others parked 'waiting', and each was woken and claimed.
my ($awaits, $parked, $never) = split /\|/, rows(q{
SELECT (SELECT count(*) FROM tree_end WHERE kind = 'await'),
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM tree_end e WHERE e.queue = j.queue
                              AND e.id = j.id AND e.kind = 'await' AND e.outcome = 'waiting')),
       count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM tree_end e WHERE e.queue = j.queue
                              AND e.id = j.id AND e.kind = 'await' AND e.outcome = 'waiting'))
  FROM wf.job j WHERE j.queue LIKE 'tree.%' AND j.payload->>'role' = 'spawn'});
diag("wf_await_children calls that ended an attempt: $awaits; spawning steps that parked"
	  . " waiting: $parked, that never did: $never");
cmp_ok($parked, '>=', $spawns * 0.8, 'spawning steps parked in wf_await_children');
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s attempt %s', e.queue, e.id, e.attempt), ', '), '')
  FROM tree_end e
 WHERE e.kind = 'await' AND e.outcome = 'waiting'
   AND NOT EXISTS (SELECT 1 FROM tree_claim c WHERE c.queue = e.queue AND c.id = e.id
                                                AND c.attempt > e.attempt)}),
	'', 'every step parked waiting for its children was woken and claimed again');

# ---- attempts: one holder at a time ----
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s/%s x%s', queue, id, attempt, n), ', '), '')
  FROM (SELECT queue, id, attempt, count(*) AS n FROM tree_claim
         GROUP BY 1, 2, 3 HAVING count(*) > 1) d}),
	'', 'no attempt was handed out twice');
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s attempt %s ended (%s, %s) at %s, attempt %s claimed at %s',
                                  e.queue, e.id, e.attempt, e.kind, e.worker, e.end_before,
                                  c.attempt, c.claimed_at), E'\n'), '')
  FROM (SELECT queue, id, attempt, kind, worker, end_before FROM tree_end
         WHERE outcome IS NOT NULL AND outcome <> 'false'
        UNION ALL
        SELECT parent_queue, parent_id, attempt, 'wf_start_child ' || name, worker, called_before
          FROM tree_child_start WHERE workflow_id IS NOT NULL) e
  JOIN tree_claim c ON c.queue = e.queue AND c.id = e.id AND c.attempt > e.attempt
 WHERE c.claimed_at <= e.end_before}),
	'', 'no fenced call of an attempt succeeded after a later attempt of its job was claimed');
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s: %s', queue, id, attempts), E'\n'), '')
  FROM (SELECT c.queue, c.id, array_agg(c.attempt ORDER BY c.claimed_at, c.seq) AS attempts,
               array_agg(c.attempt ORDER BY c.attempt) AS sorted
          FROM tree_claim c GROUP BY 1, 2) x
 WHERE attempts <> sorted}),
	'', "each job's attempts were claimed in order");
is( rows(q{
SELECT coalesce(string_agg(format('%s/%s: claimed %s, job attempt %s', j.queue, j.id, c.attempts,
                                  j.attempt), E'\n'), '')
  FROM wf.job j
  LEFT JOIN (SELECT queue, id, array_agg(attempt ORDER BY attempt) AS attempts
               FROM tree_claim GROUP BY 1, 2) c ON c.queue = j.queue AND c.id = j.id
 WHERE j.queue LIKE 'tree.%' AND c.attempts[cardinality(c.attempts)] IS DISTINCT FROM j.attempt}),
	'', "each job's last claimed attempt is the one that completed it");
my $rerun = rows(q{SELECT count(*) FROM wf.job WHERE queue LIKE 'tree.%' AND attempt > 1});
my $claims = rows(q{SELECT count(*) FROM tree_claim});
diag("$claims claims of $jobs steps; steps claimed more than once (parked or recovered): $rerun");
is(rows(q{SELECT count(*) FROM wf.ready WHERE queue LIKE 'tree.%'}), '0', 'nothing left ready');
is(rows(q{SELECT count(*) FROM wf.claim WHERE queue LIKE 'tree.%'}), '0', 'nothing left claimed');
is(rows(q{SELECT count(*) FROM wf.event_wait WHERE queue LIKE 'tree.%'}), '0',
	'nothing left waiting');

# ---- the server log: no crash but ours, no internal error ----
my $log = slurp_file($node->logfile);
my @crashes = grep {
	/PANIC|was terminated by signal (?!9:)|server process \(PID \d+\) exited with exit code/
} split /\n/, $log;
is(join("\n", @crashes[0 .. ($#crashes < 19 ? $#crashes : 19)]), '',
	'no process crashed (other than the backends SIGKILLed on purpose)');
my @internal = grep { /(ERROR|FATAL|PANIC):  (XX|58)[0-9A-Z]{3}:/ } split /\n/, $log;
is(join("\n", @internal[0 .. ($#internal < 19 ? $#internal : 19)]), '',
	'the log has no error of class XX or 58');
diag(sprintf('023_workflow_tree_crash: %.0f s in all', time() - $t_start));

$node->stop;
done_testing();
