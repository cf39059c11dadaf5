# Helpers shared by the pg_wf TAP tests (test/t/*.pl): a node with pg_wf,
# clients that can be killed, and waits that poll inside the server so that
# measured times are not blurred by starting psql.
package WfTap;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

our @EXPORT = qw(wf_node wf_install_helpers client_pid kill_client backend_pid
  wait_status_epoch reaper_count wait_reapers median now_s start_query
  finish_query wait_worker_serves);

sub now_s { return Time::HiRes::time(); }

# A started node with pg_wf created in `postgres`.
#   preload        => 0 leaves pg_wf out of shared_preload_libraries
#   sweep_interval => '200ms'
#   conf           => extra postgresql.conf lines
#   allows_streaming => 1 for a primary with a standby
sub wf_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(allows_streaming => $opt{allows_streaming} ? 1 : 0);
	my $preload = exists $opt{preload} ? $opt{preload} : 1;
	my $conf = '';
	$conf .= "shared_preload_libraries = 'pg_wf'\n" if $preload;
	$conf .= "wf.sweep_interval = '" . ($opt{sweep_interval} // '200ms') . "'\n";
	$conf .= "max_worker_processes = 16\n";
	$conf .= "restart_after_crash = on\n";
	$conf .= $opt{conf} if $opt{conf};
	$node->append_conf('postgresql.conf', $conf);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_wf') unless $opt{no_extension};
	wf_install_helpers($node, 'postgres') unless $opt{no_extension};
	return $node;
}

# wf_test_wait_status(queue, ids, status, timeout_s): polls every 2 ms inside
# the server until every job in `ids` has `status`; returns the epoch at
# which it saw that, or NULL at the timeout.
sub wf_install_helpers
{
	my ($node, $db) = @_;
	$node->safe_psql($db, q{
CREATE FUNCTION wf_test_wait_status(q text, ids bigint[], want text, timeout_s float8)
RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE deadline timestamptz := clock_timestamp() + make_interval(secs => timeout_s);
BEGIN
  LOOP
    IF NOT EXISTS (SELECT 1 FROM wf.jobs j
                    WHERE j.queue = q AND j.id = ANY(ids) AND j.status <> want) THEN
      RETURN extract(epoch FROM clock_timestamp());
    END IF;
    IF clock_timestamp() > deadline THEN RETURN NULL; END IF;
    PERFORM pg_sleep(0.002);
  END LOOP;
END $$;
CREATE FUNCTION wf_test_wait_for_waiter(p int, timeout_s float8)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE deadline timestamptz := clock_timestamp() + make_interval(secs => timeout_s);
BEGIN
  LOOP
    PERFORM pg_stat_clear_snapshot();
    IF EXISTS (SELECT 1 FROM pg_stat_activity
                WHERE pid = p AND state = 'active' AND wait_event_type = 'Extension') THEN
      RETURN true;
    END IF;
    IF clock_timestamp() > deadline THEN RETURN false; END IF;
    PERFORM pg_sleep(0.001);
  END LOOP;
END $$;
-- Whether a worker serves the database: only then does an enqueue into a
-- queue that claims in plain order leave its ready row out of the key
-- order (1.10). The probe job is cancelled.
CREATE FUNCTION wf_test_worker_serves() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE probe bigint; outside boolean;
BEGIN
  probe := wf_enqueue('wf_test_probe', '{}');
  SELECT NOT r.key_order INTO outside FROM wf.ready r WHERE r.queue = 'wf_test_probe' AND r.id = probe;
  PERFORM wf_cancel('wf_test_probe', probe);
  RETURN outside;
END $$;
});
}

# Waits until a worker serves the database (wf_test_worker_serves).
sub wait_worker_serves
{
	my ($node, $db) = @_;
	return $node->poll_query_until($db // 'postgres', 'SELECT wf_test_worker_serves()');
}

# The pid of the psql process behind a background_psql session.
sub client_pid
{
	my ($session) = @_;
	return $session->{run}{KIDS}[0]{PID};
}

sub backend_pid
{
	my ($session) = @_;
	return $session->query_safe('SELECT pg_backend_pid()') + 0;
}

# SIGKILL the client process (psql), not its backend; returns the time of
# the kill.
sub kill_client
{
	my ($session) = @_;
	my $pid = client_pid($session);
	my $comm = '';
	if (open my $fh, '<', "/proc/$pid/comm")
	{
		$comm = <$fh> // '';
		chomp $comm;
		close $fh;
	}
	is($comm, 'psql', "process $pid killed with SIGKILL is the psql client");
	my $t = now_s();
	kill 'KILL', $pid;
	eval { $session->{run}->finish; };
	return $t;
}

# Epoch at which the jobs reached `status`, seen from a session that is
# already connected (so connection set-up does not count).
sub wait_status_epoch
{
	my ($watcher, $queue, $ids, $status, $timeout) = @_;
	my $list = join(',', @$ids);
	my $r = $watcher->query_safe(
		"SELECT wf_test_wait_status('$queue', ARRAY[$list]::bigint[], '$status', $timeout)");
	return $r eq '' ? undef : $r + 0;
}

sub reaper_count
{
	my ($node, $db) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_wf reaper'"
		  . " AND datname = '$db'");
}

sub wait_reapers
{
	my ($node, $db, $want) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) = $want FROM pg_stat_activity WHERE backend_type = 'pg_wf reaper'"
		  . " AND datname = '$db'");
}

# Sends a query to a background_psql session without waiting for it (a
# claimer that blocks in wf_claim(wait => ...)); finish_query collects its
# output (stdout, and stderr in list context).
sub start_query
{
	my ($s, $sql) = @_;
	my $n = ++$s->{wf_async};
	$s->{wf_marker} = "wf_async_done_$n";
	$s->{stdout} = '';
	$s->{stderr} = '';
	$s->{stdin} .= "$sql;\n\\echo $s->{wf_marker}\n\\warn $s->{wf_marker}\n";
	$s->{run}->pump_nb;
	return;
}

sub finish_query
{
	my ($s) = @_;
	my $m = $s->{wf_marker};
	$s->{run}->pump
	  until ($s->{stdout} =~ /$m\n/ && $s->{stderr} =~ /$m\n/)
	  || $s->{timeout}->is_expired;
	die "background query timed out" if $s->{timeout}->is_expired;
	my $out = $s->{stdout};
	my $err = $s->{stderr};
	$out =~ s/\n?$m\n//;
	$err =~ s/\n?$m\n//;
	$s->{stdout} = '';
	$s->{stderr} = '';
	return wantarray ? ($out, $err) : $out;
}

sub median
{
	my @s = sort { $a <=> $b } @_;
	return undef unless @s;
	return @s % 2 ? $s[$#s / 2] : ($s[@s / 2 - 1] + $s[@s / 2]) / 2;
}

1;
