# Nothing pg_wf runs can be made to run someone else's code. The owner of a
# database (not a superuser; in PostgreSQL 15 it owns schema public) plants
# functions and an operator that match pg_wf's unqualified calls better than
# pg_catalog's, and puts public first in the database's search_path. Neither
# the background worker (a superuser) nor a superuser's calls of pg_wf's
# functions may ever run them: the planted code records every run, and
# makes its owner superuser when it runs as one. Triggers, rules and row
# security cannot be attached to pg_wf's tables, and what is attached
# anyway stops pg_wf until it is removed. An open transaction that holds a
# running job's row does not stall the recovery of other jobs.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('planted', sweep_interval => '200ms', no_extension => 1);
$node->safe_psql('postgres', 'CREATE ROLE dbowner LOGIN; CREATE DATABASE app OWNER dbowner');
$node->safe_psql('app', 'CREATE EXTENSION pg_wf');
wf_install_helpers($node, 'app');
ok(wait_reapers($node, 'app', 1), 'a reaper serves database app');

# ---- the plant, by the database owner ----
$node->safe_psql('app', q{
-- The test's own helper resolves names in pg_catalog, so that only pg_wf
-- can be what runs the plant.
ALTER FUNCTION wf_test_wait_status(text, bigint[], text, float8) SET search_path = pg_catalog, pg_temp;
SET ROLE dbowner;
CREATE TABLE public.planted_runs (what text, as_superuser boolean);
GRANT INSERT ON public.planted_runs TO PUBLIC;
CREATE FUNCTION public.wf_planted(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.planted_runs VALUES (what, current_setting('is_superuser') = 'on');
  IF current_setting('is_superuser') = 'on' THEN EXECUTE 'ALTER ROLE dbowner SUPERUSER'; END IF;
END $$;
-- Better matches than pg_catalog's for what pg_wf's statements call.
CREATE FUNCTION public.format(text, int, int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.wf_planted('format(text,int,int)'); RETURN pg_catalog.format($1, $2, $3); END $$;
CREATE FUNCTION public.format(text, text, bigint, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.wf_planted('format(text,text,bigint,text)'); RETURN pg_catalog.format($1, $2, $3, $4); END $$;
CREATE FUNCTION public.format(text, bigint, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.wf_planted('format(text,bigint,text)'); RETURN pg_catalog.format($1, $2, $3); END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.wf_planted('now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION public.gen_random_uuid() RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN PERFORM public.wf_planted('gen_random_uuid()'); RETURN pg_catalog.gen_random_uuid(); END $$;
CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.wf_planted('unnest(bigint[])'); RETURN QUERY SELECT pg_catalog.unnest($1); END $$;
CREATE FUNCTION public.jsonb_build_object(text, jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.wf_planted('jsonb_build_object(text,jsonb)'); RETURN pg_catalog.jsonb_build_object($1, $2); END $$;
CREATE FUNCTION public.wf_planted_eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.wf_planted('=(bigint,bigint)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.wf_planted_eq);
CREATE FUNCTION public.wf_planted_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM public.wf_planted('trigger on ' || TG_TABLE_NAME); RETURN NEW; END $$;
ALTER DATABASE app SET search_path = public, pg_catalog;
});
# The worker reads the database's search_path when it starts.
$node->restart;
ok(wait_reapers($node, 'app', 1), 'the reaper is back after the restart');

my $runs = 'SELECT count(*) FROM public.planted_runs';
my $superuser = q{SELECT rolsuper FROM pg_roles WHERE rolname = 'dbowner'};

# The plant is live: its owner's own plain call runs it.
$node->safe_psql('app', q{SET ROLE dbowner; SELECT format('%s-%s', 1, 2), 7::bigint = 7::bigint});
is($node->safe_psql('app', $runs), '2', 'the planted format() and = run for their owner');
$node->safe_psql('app', 'TRUNCATE public.planted_runs');

# ---- the worker: recovery of a killed claimer's jobs, event timeouts, cron ----
$node->safe_psql('app', q{
SELECT wf_enqueue('pl', jsonb_build_object('n', g)) FROM generate_series(1, 3) g;
SELECT wf_configure_queue('pl_lease', lease => '1 second');
SELECT wf_enqueue('pl_lease', '{}');
SELECT wf_schedule('pl_tick', '0 0 1 1 *', 'pl_cron');
UPDATE wf.schedule SET next_run_at = pg_catalog.now() - interval '1 minute' WHERE name = 'pl_tick';
});
my $claimer = $node->background_psql('app');
my @ids = split /\n/, $claimer->query_safe("SELECT id FROM wf_claim('pl', max_jobs => 3)");
is(scalar(@ids), 3, 'a claimer holds three jobs');
$claimer->query_safe("SELECT count(*) FROM wf_claim('pl_lease')");
my $leased = $node->safe_psql('app', "SELECT id FROM wf.jobs WHERE queue = 'pl_lease'");
kill_client($claimer);
my $watcher = $node->background_psql('app');
ok(defined wait_status_epoch($watcher, 'pl', \@ids, 'pending', 30),
	'the worker recovered the killed claimer\'s jobs');
ok($node->poll_query_until('app', "SELECT count(*) = 1 FROM wf.jobs WHERE queue = 'pl_cron'"),
	'the worker fired the due schedule');
ok($node->poll_query_until('app', "SELECT status = 'pending' FROM wf.jobs WHERE id = $leased"),
	'and recovered the job whose lease expired');

# ---- a superuser's calls, under the database's search_path ----
my $calls = q{
SELECT wf_enqueue('pl_dep', '{"n": "parent"}') AS parent \gset
SELECT wf_enqueue('pl_dep', '{"n": "child"}', depends_on => ARRAY[:parent]) AS child \gset
SELECT wf_enqueue('pl_dep', '{"n": "grandchild"}', depends_on => ARRAY[:child]) AS grandchild \gset
SELECT wf_enqueue_batch('pl_batch', '[{"n": 1}, {"n": 2}]');
SELECT id, attempt FROM wf_claim('pl_dep') \gset c_
SELECT wf_complete('pl_dep', :c_id, :c_attempt, '{"ok": true}');
SELECT id, attempt, inputs FROM wf_claim('pl_dep') \gset d_
SELECT wf_checkpoint('pl_dep', :d_id, :d_attempt, 'step', '{}');
SELECT wf_heartbeat('pl_dep', :d_id, :d_attempt, '1 minute');
SELECT wf_fail('pl_dep', :d_id, :d_attempt, 'boom', permanent => true);
SELECT wf_retry('pl_dep', :d_id);
SELECT id, attempt FROM wf_claim('pl_dep') \gset e_
SELECT wf_await_event('pl_dep', :e_id, :e_attempt, 'pl_event', timeout => '1 hour');
SELECT wf_signal('pl_event', '{"go": 1}');
SELECT id, attempt FROM wf_claim('pl_dep') \gset f_
SELECT wf_snooze('pl_dep', :f_id, :f_attempt, '0');
SELECT id, attempt FROM wf_claim('pl_dep') \gset g_
SELECT * FROM wf_complete_and_claim('pl_dep', :g_id, :g_attempt, '{}');
SELECT wf_cancel('pl_dep', :grandchild);
SELECT wf_submit('{"name": "pl_flow", "steps": [{"name": "a", "queue": "pl_flow"},
                  {"name": "b", "queue": "pl_flow", "after": ["a"]}]}') AS flow \gset
SELECT wf_workflow(:'flow') IS NOT NULL;
SELECT id, attempt FROM wf_claim('pl_flow') \gset h_
SELECT wf_complete_many('pl_flow', ARRAY[:h_id]::bigint[], ARRAY[:h_attempt]::int[]);
SELECT wf_cancel_workflow(:'flow');
SELECT wf_configure_queue('pl_dep', max_running => 5);
SELECT count(*) FROM wf_claim('pl_dep', wait => '10 milliseconds');
SELECT wf_schedule('pl_tick2', '0 0 * * *', 'pl_cron');
SELECT wf_unschedule('pl_tick2');
SELECT wf_sweep();
SELECT wf_recover_lost_claims();
SELECT count(*) FROM wf.jobs; SELECT count(*) FROM wf.queue_stats; SELECT count(*) FROM wf.workflows;
};
my ($rc, $out, $err) = $node->psql('app', $calls, on_error_stop => 1);
is($rc, 0, 'every function ran under the planted search_path') or diag($err);
is($node->safe_psql('app', 'SHOW search_path'), 'public, pg_catalog',
	'the sessions had public before pg_catalog');
is($node->safe_psql('app', $runs), '0', 'no planted function or operator ran')
  or diag($node->safe_psql('app', 'SELECT * FROM public.planted_runs'));
is($node->safe_psql('app', $superuser), 'f', 'the database owner is not superuser');

# ---- attaching code to pg_wf's tables is refused, for anyone ----
$node->safe_psql('app', 'GRANT TRIGGER ON wf.job TO dbowner');
my @attach = (
	'CREATE TRIGGER t BEFORE UPDATE ON wf.job FOR EACH ROW EXECUTE FUNCTION public.wf_planted_trigger()',
	'CREATE CONSTRAINT TRIGGER t AFTER UPDATE ON wf.claim FOR EACH ROW EXECUTE FUNCTION public.wf_planted_trigger()',
	'CREATE RULE r AS ON UPDATE TO wf.job DO ALSO SELECT public.wf_planted(\'rule\')',
	'CREATE POLICY p ON wf.ready USING (public.wf_planted(\'policy\') IS NULL)',
	'ALTER TABLE wf.ready ENABLE ROW LEVEL SECURITY',
	'ALTER TABLE wf.job OWNER TO dbowner',
	'ALTER TABLE wf.job ENABLE TRIGGER ALL',
	# A table named without its schema is found as the command finds it
	# (until 1.12 the event trigger looked in pg_catalog only).
	"SET search_path = wf, public;\nCREATE TRIGGER t BEFORE UPDATE ON job FOR EACH ROW EXECUTE FUNCTION public.wf_planted_trigger()",
	"SET search_path = wf, public;\nCREATE RULE r AS ON UPDATE TO claim DO ALSO SELECT public.wf_planted('rule')");
for my $sql (@attach)
{
	my ($rc, $out, $err) = $node->psql('app', "\\set VERBOSITY verbose\n$sql");
	like($err, qr/ERROR:  42501: pg_wf's tables take no triggers, rules, row security or new owners/,
		"refused for a superuser: $sql");
}
my ($rc2, $out2, $err2) = $node->psql('app',
	"SET ROLE dbowner;\n\\set VERBOSITY verbose\nCREATE TRIGGER t BEFORE UPDATE ON wf.job FOR EACH ROW"
	  . " EXECUTE FUNCTION public.wf_planted_trigger()");
like($err2, qr/ERROR:  42501: pg_wf's tables take no triggers/,
	'refused for a role granted TRIGGER on wf.job');
# Other changes of its tables (storage settings) are not refused.
$node->safe_psql('app', 'ALTER TABLE wf.job SET (fillfactor = 90); ALTER TABLE wf.job RESET (fillfactor)');

# ---- what is attached anyway stops pg_wf until it is removed ----
$node->safe_psql('app', q{
ALTER EVENT TRIGGER wf_guard DISABLE;
CREATE TRIGGER t BEFORE UPDATE ON wf.job FOR EACH ROW EXECUTE FUNCTION public.wf_planted_trigger();
ALTER EVENT TRIGGER wf_guard ENABLE;
});
my $claimer2 = $node->background_psql('app');
($rc, $out, $err) = $node->psql('app', "\\set VERBOSITY verbose\nSELECT wf_enqueue('pl_stop', '{}')");
like($err, qr/ERROR:  55000: pg_wf refuses to run: its tables have a trigger on wf\.job/,
	'a function refuses to run with a trigger attached');
ok($node->wait_for_log(qr/pg_wf worker: database "app": pg_wf's tables have a trigger on wf\.job attached/),
	'the worker says why it leaves the database alone');
$node->safe_psql('app', 'DROP TRIGGER t ON wf.job');
my $stopped = $node->safe_psql('app', "SELECT wf_enqueue('pl_stop', '{}')");
ok($stopped > 0, 'once it is removed, functions run again');
my $sid = $claimer2->query_safe("SELECT id FROM wf_claim('pl_stop')");
kill_client($claimer2);
ok(defined wait_status_epoch($watcher, 'pl_stop', [$sid], 'pending', 30), 'and so does the worker');
is($node->safe_psql('app', $runs), '0', 'the attached trigger never ran');
is($node->safe_psql('app', $superuser), 'f', 'the database owner is still not superuser');

# ---- a schedule fires with the rights of the role that made it, checked at each tick ----
$node->safe_psql('app', q{
CREATE ROLE sched_owner;
SELECT wf_grant('sched_owner', 'administer', 'pl_s.*');
SET ROLE sched_owner;
SELECT wf_schedule('pl_s_tick', '0 0 1 1 *', 'pl_s.q');
RESET ROLE;
UPDATE wf.schedule SET next_run_at = pg_catalog.now() - interval '1 minute' WHERE name = 'pl_s_tick';
});
ok($node->poll_query_until('app', "SELECT count(*) = 1 FROM wf.jobs WHERE queue = 'pl_s.q'"),
	'a schedule fires while its owner may produce in its queue');
$node->safe_psql('app', q{
SELECT wf_revoke('sched_owner', 'administer', 'pl_s.*');
UPDATE wf.schedule SET next_run_at = pg_catalog.now() - interval '1 minute' WHERE name = 'pl_s_tick';
});
ok($node->wait_for_log(qr/schedule "pl_s_tick" skipped a tick: its owner may not produce in queue "pl_s.q"/),
	'once its owner lost the right, its tick is skipped, with a warning');
ok( $node->poll_query_until('app',
		"SELECT next_run_at > pg_catalog.now() FROM wf.schedule WHERE name = 'pl_s_tick'"),
	'and the schedule moved on');
is($node->safe_psql('app', "SELECT count(*) FROM wf.jobs WHERE queue = 'pl_s.q'"), '1',
	'without a job');

# ---- an open transaction holding a running job's row stalls no other recovery ----
$node->safe_psql('app', "SELECT wf_enqueue('px', '{}') FROM generate_series(1, 2)");
my $w1 = $node->background_psql('app');
my $w2 = $node->background_psql('app');
my $held = $w1->query_safe("SELECT id FROM wf_claim('px')");
my $other = $w2->query_safe("SELECT id FROM wf_claim('px')");
my $producer = $node->background_psql('app');
$producer->query_safe('BEGIN');
$producer->query_safe("SELECT wf_enqueue('px_child', '{}', depends_on => ARRAY[$held]::bigint[])");
kill_client($w1);
kill_client($w2);
ok(defined wait_status_epoch($watcher, 'px', [$other], 'pending', 30),
	'the other dead session\'s job is recovered while a producer holds the first one\'s row');
is($node->safe_psql('app', "SELECT status FROM wf.jobs WHERE id = $held"), 'running',
	'the held job waits');
$producer->query_safe('COMMIT');
ok(defined wait_status_epoch($watcher, 'px', [$held], 'pending', 30),
	'and is recovered once the producer commits');
$producer->quit;
$watcher->quit;

done_testing();
