// Worker processes and signals: SIGTERM and SIGINT mid-job and idle (the graceful shutdown), and
// SIGKILL (the server recovers the job, another worker finishes it, once).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';

import { enqueue, waitJob } from 'pg-wf';

import { DSN, EFFECTS, ensureEffects, eventually, jobRow, pool, q, uniqueQueue, waitStatus } from './helpers.js';

const CHILD = fileURLToPath(new URL('./fixtures/worker-child.js', import.meta.url));

interface Child {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

const children: Child[] = [];

function startWorker(queue: string, env: Record<string, string>): Child {
  const proc = spawn(process.execPath, [CHILD], {
    env: { ...process.env, PG_WF_TEST_DSN: DSN, WF_QUEUE: queue, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const exited = once(proc, 'exit').then(([code, signal]) => ({ code, signal, at: Date.now() }));
  const child = { proc, output: () => out, exited };
  children.push(child);
  return child;
}

async function exitWithin(child: Child, ms: number) {
  let timer: NodeJS.Timeout | undefined;
  const res = await Promise.race([
    child.exited,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`worker did not exit within ${ms} ms; its output:\n${child.output()}`)), ms);
    }),
  ]);
  clearTimeout(timer);
  return res;
}

async function effects(queue: string, id: number) {
  return q<{ attempt: number; note: string }>(
    `SELECT attempt, note FROM ${EFFECTS} WHERE queue = $1 AND job_id = $2 ORDER BY at, note`,
    [queue, id],
  );
}

/** Until the child's claims wait in the server (its slots are connected and idle). */
async function claimsWaiting(child: Child, n = 1) {
  await eventually(async () => {
    const [{ c }] = await q(
      `SELECT count(*)::int AS c FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query LIKE '%wf_claim(%'`,
      [`pg_wf child-${child.proc.pid}`],
    );
    return c >= n;
  }, 'the child\'s waiting claims');
}

after(async () => {
  for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
  await pool.end();
});

describe('worker processes', () => {
  test('SIGTERM mid-job: the job finishes, nothing new is claimed, the process exits by itself', async () => {
    await ensureEffects();
    const queue = uniqueQueue('sigterm');
    const child = startWorker(queue, { WF_JOB_MS: '1500' });
    const id = await enqueue(pool, queue, {});
    await waitStatus(queue, id, 'running');
    const sent = Date.now();
    child.proc.kill('SIGTERM');
    const later = await enqueue(pool, queue, {});
    const exit = await exitWithin(child, 10_000);
    assert.deepEqual([exit.code, exit.signal], [0, null], child.output());
    assert.ok(exit.at - sent < 5000, `exited ${exit.at - sent} ms after SIGTERM`);
    const row = await jobRow(queue, id);
    assert.equal(row.status, 'done');
    assert.equal(row.attempt, 1);
    assert.deepEqual((await effects(queue, id)).map((e) => [e.attempt, e.note]), [[1, 'started'], [1, 'done']]);
    const untouched = await jobRow(queue, later);
    assert.deepEqual([untouched.status, untouched.attempt], ['pending', 0], 'no claim after SIGTERM');
    assert.match(child.output(), /received SIGTERM; no new claims/);
  });

  test('SIGINT while idle: the waiting claims are cancelled and the process exits at once', async () => {
    const queue = uniqueQueue('sigint');
    const child = startWorker(queue, {});
    await claimsWaiting(child);
    const sent = Date.now();
    child.proc.kill('SIGINT');
    const exit = await exitWithin(child, 10_000);
    assert.deepEqual([exit.code, exit.signal], [0, null], child.output());
    assert.ok(exit.at - sent < 3000, `exited ${exit.at - sent} ms after SIGINT (its claims wait 10 s)`);
  });

  test('SIGTERM with a job past the shutdown timeout: given back, then finished once by another worker', async () => {
    await ensureEffects();
    const queue = uniqueQueue('giveback');
    const first = startWorker(queue, { WF_JOB_MS: '60000', WF_SHUTDOWN_TIMEOUT: '500', WF_EXIT_AFTER_RUN: '1' });
    const id = await enqueue(pool, queue, {});
    await waitStatus(queue, id, 'running');
    const sent = Date.now();
    first.proc.kill('SIGTERM');
    const exit = await exitWithin(first, 10_000);
    assert.deepEqual([exit.code, exit.signal], [0, null], first.output());
    assert.ok(exit.at - sent < 4000, `exited ${exit.at - sent} ms after SIGTERM`);
    const row = await jobRow(queue, id);
    assert.deepEqual([row.status, row.attempt], ['pending', 1], 'back in the queue, its attempt counted');
    assert.match(row.last_error, /shut down: the job was given back after 500 ms/);
    assert.match(first.output(), /still running at shutdown, given back \(wf_fail -> pending\)/);

    const second = startWorker(queue, { WF_JOB_MS: '0' });
    const res = await waitJob(pool, queue, id, { timeout: '15 seconds' });
    assert.equal(res.status, 'done', second.output());
    assert.deepEqual((res.result as any).attempt, 2);
    assert.deepEqual((await effects(queue, id)).map((e) => [e.attempt, e.note]), [
      [1, 'started'],
      [2, 'started'],
      [2, 'done'],
    ]);
    second.proc.kill('SIGTERM');
    assert.equal((await exitWithin(second, 10_000)).code, 0);
  });

  test('SIGKILL mid-job: the server recovers the job and another worker finishes it exactly once', async () => {
    await ensureEffects();
    const queue = uniqueQueue('sigkill');
    const doomed = startWorker(queue, { WF_JOB_MS: '60000' });
    const id = await enqueue(pool, queue, {});
    await eventually(async () => (await effects(queue, id)).length === 1, 'the first attempt to start');
    doomed.proc.kill('SIGKILL');
    const killedAt = Date.now();
    const exit = await exitWithin(doomed, 5000);
    assert.equal(exit.signal, 'SIGKILL');
    const recovered = await waitStatus(queue, id, 'pending', 10_000);
    assert.ok(Date.now() - killedAt < 5000, `recovered ${Date.now() - killedAt} ms after the kill`);
    assert.equal(recovered.attempt, 1, 'the lost attempt counts');
    assert.match(recovered.last_error, /lost/i);

    const rescuer = startWorker(queue, { WF_JOB_MS: '0' });
    const res = await waitJob(pool, queue, id, { timeout: '15 seconds' });
    assert.equal(res.status, 'done', rescuer.output());
    assert.equal((res.result as any).attempt, 2);
    assert.equal((res.result as any).pid, rescuer.proc.pid);
    const rows = await effects(queue, id);
    assert.deepEqual(rows.map((e) => [e.attempt, e.note]), [[1, 'started'], [2, 'started'], [2, 'done']]);
    assert.equal(rows.filter((e) => e.note === 'done').length, 1, 'finished exactly once');
    rescuer.proc.kill('SIGTERM');
    assert.equal((await exitWithin(rescuer, 10_000)).code, 0);
  });
});
