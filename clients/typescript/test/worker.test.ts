// The Worker and the job context against a real server: handlers, errors, concurrency,
// heartbeats, exactly-once effects, checkpoints, sleeps, events, child workflows, result waits,
// signal-with-start, fan-out, progress, versions, and a graceful stop.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import {
  JobLost,
  EventTimeout,
  PermanentError,
  RetryAfter,
  cancel,
  configureQueue,
  enqueue,
  levelLogger,
  signal,
  signalWithStart,
  submit,
  waitJob,
  waitWorkflow,
  type Job,
  type Worker,
} from 'pg-wf';

import { EFFECTS, MemoryLogger, delay, ensureEffects, eventually, jobRow, pool, q, testWorker, uniqueQueue, waitStatus } from './helpers.js';

after(() => pool.end());

/** Starts the worker, runs `body`, and always stops it. */
async function withWorker(worker: Worker, body: () => Promise<void>): Promise<void> {
  await worker.start();
  try {
    await body();
  } finally {
    await worker.stop({ timeout: 2000 });
  }
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('worker', () => {
  test('a handler\'s return value completes its job; the context carries payload, attempt, inputs', async () => {
    const queue = uniqueQueue('basic');
    const worker = testWorker();
    worker.register<{ n: number }>(queue, (job) => ({
      step: job.step,
      n: job.payload.n,
      attempt: job.attempt,
      inputs: job.inputs,
      workflow: job.workflowId,
    }));
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, { n: 7 });
      const one = await waitJob(pool, queue, id, { timeout: '10 seconds' });
      assert.equal(one.status, 'done');
      assert.deepEqual(one.result, { step: null, n: 7, attempt: 1, inputs: {}, workflow: null });

      const wf = await submit(pool, {
        queue,
        steps: [{ name: 'a', payload: { n: 1 } }, { name: 'b', after: ['a'], payload: { n: 2 } }],
      });
      const res = await waitWorkflow<any>(pool, wf, { timeout: '10 seconds' });
      assert.equal(res.status, 'done');
      assert.equal(res.result.b.n, 2);
      assert.equal(res.result.b.workflow, wf);
      assert.deepEqual(res.result.b.inputs, { a: { step: 'a', n: 1, attempt: 1, inputs: {}, workflow: wf } });
    });
  });

  test('a thrown error fails the attempt with its message and a trimmed stack; the retry runs', async () => {
    const queue = uniqueQueue('errors');
    await configureQueue(pool, queue, { backoffBase: 50, backoffMax: 100 });
    const worker = testWorker();
    function deepInside(): never {
      throw new TypeError('the upstream said no');
    }
    worker.register<{ flaky: boolean }>(queue, (job) => {
      if (!job.payload.flaky || job.attempt === 1) deepInside();
      return { attempt: job.attempt };
    });
    await withWorker(worker, async () => {
      const dead = await enqueue(pool, queue, { flaky: false }, { maxAttempts: 1 });
      const row = await waitStatus(queue, dead, 'failed');
      assert.match(row.last_error, /^TypeError: the upstream said no\n/);
      assert.match(row.last_error, /\n\s+at deepInside /);
      assert.doesNotMatch(row.last_error, /node:internal/);
      assert.ok(row.last_error.split('\n').length <= 13, 'the stack is trimmed');

      const flaky = await enqueue(pool, queue, { flaky: true });
      const done = await waitJob(pool, queue, flaky, { timeout: '10 seconds' });
      assert.equal(done.status, 'done');
      assert.deepEqual(done.result, { attempt: 2 });
    });
  });

  test('PermanentError fails at once; RetryError sets the retry\'s delay', async () => {
    const queue = uniqueQueue('permanent');
    const worker = testWorker();
    const seen: number[] = [];
    worker.register<{ kind: string }>(queue, (job) => {
      if (job.payload.kind === 'permanent') throw new PermanentError('card declined');
      seen.push(Date.now());
      if (job.attempt === 1) throw new RetryAfter(600, 'rate limited');
      return 'ok';
    });
    await withWorker(worker, async () => {
      const p = await enqueue(pool, queue, { kind: 'permanent' });
      const row = await waitStatus(queue, p, 'failed');
      assert.equal(row.attempt, 1, 'no retry after a PermanentError');
      assert.match(row.last_error, /^PermanentError: card declined/);

      const r = await enqueue(pool, queue, { kind: 'retry' });
      assert.equal((await waitJob(pool, queue, r, { timeout: '10 seconds' })).status, 'done');
      assert.equal(seen.length, 2);
      assert.ok(seen[1]! - seen[0]! >= 500, `retried after ${seen[1]! - seen[0]!} ms, asked for 600`);
    });
  });

  test('concurrency: at most N jobs at once, each on its own session', async () => {
    const queue = uniqueQueue('concurrency');
    const worker = testWorker({ concurrency: 3 });
    let running = 0;
    let peak = 0;
    const pids = new Set<number>();
    worker.register(queue, async (job) => {
      running++;
      peak = Math.max(peak, running);
      const { rows } = await job.client.query('SELECT pg_backend_pid() AS pid');
      pids.add(rows[0].pid);
      await delay(300);
      running--;
      return null;
    });
    await withWorker(worker, async () => {
      const ids: number[] = [];
      for (let i = 0; i < 9; i++) ids.push(await enqueue(pool, queue, { i }));
      const started = Date.now();
      for (const id of ids) assert.equal((await waitJob(pool, queue, id, { timeout: '20 seconds' })).status, 'done');
      assert.equal(peak, 3, 'three at once');
      assert.equal(pids.size, 3, 'one session per slot');
      assert.ok(Date.now() - started < 2700, 'they ran side by side');
      const owners = await q('SELECT DISTINCT worker FROM wf.jobs WHERE queue = $1 ORDER BY 1', [queue]);
      assert.deepEqual(owners.map((r) => r.worker), [1, 2, 3].map((n) => `${worker.name}/${queue}/${n}`), 'slots name themselves');
    });
  });

  test('heartbeats keep a long job inside its lease', async () => {
    const queue = uniqueQueue('lease');
    await configureQueue(pool, queue, { lease: 900 });
    const worker = testWorker();
    worker.register(queue, async (job) => {
      await delay(3000);
      return { attempt: job.attempt };
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, {});
      const first = await waitStatus(queue, id, 'running');
      await delay(1500);
      const later = await jobRow(queue, id);
      assert.equal(later.status, 'running', 'still running past its first lease');
      assert.ok(new Date(later.lease_expires_at) > new Date(first.lease_expires_at), 'the lease moved on');
      const res = await waitJob(pool, queue, id, { timeout: '10 seconds' });
      assert.deepEqual(res.result, { attempt: 1 }, 'never recovered: finished by its first attempt');
    });
  });

  test('a cancel aborts job.signal; a refused completion is logged, not thrown', async () => {
    const queue = uniqueQueue('cancel');
    const logger = new MemoryLogger();
    const worker = testWorker({ logger, heartbeatEvery: 100 });
    let aborted: unknown;
    worker.register(queue, async (job) => {
      await new Promise((resolve) => job.signal.addEventListener('abort', resolve, { once: true }));
      aborted = job.signal.reason;
      return 'stopped';
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, {});
      await waitStatus(queue, id, 'running');
      assert.equal(await cancel(pool, queue, id), true);
      const row = await waitStatus(queue, id, 'cancelled');
      assert.ok(aborted instanceof JobLost);
      assert.equal(row.result, null);
      await eventually(() => logger.has('warn', /a heartbeat found it cancelled.*the handler should stop/), 'the heartbeat warning');
    });
  });

  test('a job taken back (max_run_time) finishes by its next attempt; the stale one changes nothing', async () => {
    const queue = uniqueQueue('stale');
    const logger = new MemoryLogger();
    const worker = testWorker({ logger, heartbeatEvery: 100, concurrency: 2 });
    worker.register(queue, async (job) => {
      if (job.attempt === 1) await delay(1200); // past its max_run_time: the server takes it back
      return { attempt: job.attempt };
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, {}, { maxRunTime: 300 });
      const res = await waitJob(pool, queue, id, { timeout: '10 seconds' });
      assert.deepEqual(res.result, { attempt: 2 });
      await eventually(() => logger.has('warn', /wf_complete refused a stale token/), 'the stale completion\'s warning');
      assert.ok(!logger.lines.some((l) => l.level === 'error'), JSON.stringify(logger.lines));
      assert.deepEqual((await jobRow(queue, id)).result, { attempt: 2 }, 'the late result was not recorded');
    });
  });

  test('transaction + complete: the effect commits with the completion, and not without it', async () => {
    await ensureEffects();
    const queue = uniqueQueue('exactly-once');
    // heartbeats far apart: the cancelled job learns it from its completion
    const worker = testWorker({ concurrency: 2, heartbeatEvery: 60_000 });
    const inside = deferred();
    const goOn = deferred();
    const refused: number[] = [];
    worker.register<{ hold: boolean }>(queue, async (job) => {
      const sent = await job.transaction(async (tx) => {
        await tx.query(`INSERT INTO ${EFFECTS} (queue, job_id, attempt, note) VALUES ($1, $2, $3, 'sent')`, [
          job.queue,
          job.id,
          job.attempt,
        ]);
        if (job.payload.hold) {
          inside.resolve();
          await goOn.promise; // meanwhile the job is cancelled
        }
        await job.complete({ sentBy: job.attempt });
        return 'committed';
      });
      if (sent === undefined) refused.push(job.id); // the completion was refused: rolled back
      assert.equal(sent === undefined, job.lost);
      return 'not used';
    });
    await withWorker(worker, async () => {
      const done = await enqueue(pool, queue, { hold: false });
      const cancelled = await enqueue(pool, queue, { hold: true });
      assert.deepEqual((await waitJob(pool, queue, done, { timeout: '10 seconds' })).result, { sentBy: 1 });
      await inside.promise;
      assert.equal(await cancel(pool, queue, cancelled), true);
      goOn.resolve();
      const res = await waitJob(pool, queue, cancelled, { timeout: '10 seconds' });
      assert.equal(res.status, 'cancelled', 'its attempt was ended after the refused completion');
      assert.deepEqual(refused, [cancelled]);
      const effects = await q(`SELECT job_id FROM ${EFFECTS} WHERE queue = $1`, [queue]);
      assert.deepEqual(effects.map((r) => Number(r.job_id)), [done], 'the refused completion\'s effect was rolled back');
    });
  });

  test('a job lost before its transaction gets JobLost there and writes nothing', async () => {
    await ensureEffects();
    const queue = uniqueQueue('lost-tx');
    const worker = testWorker({ concurrency: 2 });
    const thrown: unknown[] = [];
    worker.register(queue, async (job) => {
      if (job.attempt === 1) await delay(1000); // past its max_run_time: a heartbeat finds it taken back
      try {
        await job.transaction(async (tx) => {
          await tx.query(`INSERT INTO ${EFFECTS} (queue, job_id, attempt, note) VALUES ($1, $2, $3, 'sent')`, [
            job.queue,
            job.id,
            job.attempt,
          ]);
          await job.complete({ sentBy: job.attempt });
        });
      } catch (err) {
        thrown.push(err);
        throw err;
      }
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, {}, { maxRunTime: 300 });
      assert.deepEqual((await waitJob(pool, queue, id, { timeout: '10 seconds' })).result, { sentBy: 2 });
      await eventually(() => thrown.length === 1, 'the lost attempt');
      assert.ok(thrown[0] instanceof JobLost);
      const effects = await q(`SELECT attempt FROM ${EFFECTS} WHERE queue = $1`, [queue]);
      assert.deepEqual(effects.map((r) => r.attempt), [2]);
    });
  });

  test('idempotencyKey: the enqueue\'s key, else derived from (queue, id); the same in every attempt', async () => {
    const queue = uniqueQueue('idem');
    await configureQueue(pool, queue, { backoffBase: 50, backoffMax: 50 });
    const worker = testWorker({ concurrency: 2 });
    const keys = new Map<number, string[]>();
    worker.register(queue, (job) => {
      keys.set(job.id, [...(keys.get(job.id) ?? []), job.idempotencyKey]);
      if (job.attempt < 3) throw new Error('try again');
      return null;
    });
    await withWorker(worker, async () => {
      const plain = await enqueue(pool, queue, {});
      const keyed = await enqueue(pool, queue, {}, { idempotencyKey: 'payment-42' });
      await waitJob(pool, queue, plain, { timeout: '10 seconds' });
      await waitJob(pool, queue, keyed, { timeout: '10 seconds' });
      assert.deepEqual(keys.get(plain), Array(3).fill(`pg_wf:${queue}:${plain}`));
      assert.deepEqual(keys.get(keyed), Array(3).fill('payment-42'));
    });
  });

  test('checkpoint runs its function once across a retry', async () => {
    const queue = uniqueQueue('checkpoint');
    await configureQueue(pool, queue, { backoffBase: 50, backoffMax: 50 });
    const worker = testWorker();
    const calls = { draft: 0, polish: 0 };
    worker.register(queue, async (job) => {
      const draft = await job.checkpoint('draft', () => {
        calls.draft++;
        return { text: `draft by attempt ${job.attempt}` };
      });
      if (job.attempt === 1) throw new Error('crashed after the draft');
      const polished = await job.checkpoint('polish', async () => {
        calls.polish++;
        return `${draft.text}, polished`;
      });
      return { polished, checkpoints: Object.keys(job.checkpoints).sort() };
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, {});
      const res = await waitJob(pool, queue, id, { timeout: '10 seconds' });
      assert.deepEqual(res.result, { polished: 'draft by attempt 1, polished', checkpoints: ['draft', 'polish'] });
      assert.deepEqual(calls, { draft: 1, polish: 1 });
    });
  });

  test('sleep parks the job (no attempt spent, no session held) and resumes it after the delay', async () => {
    const queue = uniqueQueue('sleep');
    const worker = testWorker();
    const runs: number[] = [];
    worker.register(queue, async (job) => {
      runs.push(Date.now());
      const before = await job.checkpoint('before', () => Date.now());
      await job.sleep(400); // unnamed: pg_wf.sleep:1
      await job.sleep('0.4 seconds', 'cool-down');
      return { slept: Date.now() - before, checkpoints: Object.keys(job.checkpoints).sort() };
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, {}, { maxAttempts: 1 });
      const parked = await waitStatus(queue, id, 'pending');
      assert.equal(parked.owner_pid, null);
      const res = await waitJob<any>(pool, queue, id, { timeout: '10 seconds' });
      assert.equal(res.status, 'done', 'a sleep spends no attempt (max_attempts 1)');
      assert.ok(res.result.slept >= 800, `slept ${res.result.slept} ms`);
      assert.ok(res.result.slept < 4000, `woken late: ${res.result.slept} ms`);
      assert.deepEqual(res.result.checkpoints, ['before', 'pg_wf.sleep:1', 'pg_wf.sleep:cool-down']);
      assert.equal(runs.length, 3);
    });
  });

  test('awaitEvent: a signal resumes the job with its payload; a timeout throws EventTimeout', async () => {
    const queue = uniqueQueue('events');
    const worker = testWorker();
    worker.register<{ event: string; timeout?: number }>(queue, async (job) => {
      try {
        return { payload: await job.awaitEvent(job.payload.event, { timeout: job.payload.timeout }) };
      } catch (err) {
        if (err instanceof EventTimeout) return { timedOut: err.event };
        throw err;
      }
    });
    await withWorker(worker, async () => {
      const event = `approve:${queue}`;
      const id = await enqueue(pool, queue, { event });
      const waiting = await waitStatus(queue, id, 'waiting');
      assert.equal(waiting.waiting_for, event);
      assert.equal(await signal(pool, event, { by: 'ann' }), 1);
      const res = await waitJob(pool, queue, id, { timeout: '10 seconds' });
      assert.deepEqual(res.result, { payload: { by: 'ann' } });

      const late = await enqueue(pool, queue, { event: `never:${queue}`, timeout: 300 });
      const timedOut = await waitJob(pool, queue, late, { timeout: '10 seconds' });
      assert.deepEqual(timedOut.result, { timedOut: `never:${queue}` });

      // a signal sent before the await is kept
      const early = `early:${queue}`;
      await signal(pool, early, 'kept');
      const third = await enqueue(pool, queue, { event: early });
      assert.deepEqual((await waitJob(pool, queue, third, { timeout: '10 seconds' })).result, { payload: 'kept' });
    });
  });

  test('child workflows: startChild and awaitChildren; a failed child does not fail its parent', async () => {
    const parents = uniqueQueue('parents');
    const children = uniqueQueue('children');
    const worker = testWorker({ concurrency: 2 });
    let parentRuns = 0;
    worker.register<{ langs: string[] }>(parents, async (job) => {
      parentRuns++;
      for (const lang of job.payload.langs) {
        await job.startChild(lang, { queue: children, steps: [{ name: 'translate', payload: { lang } }] });
      }
      const outcomes = await job.awaitChildren();
      return Object.fromEntries(
        Object.entries(outcomes).map(([name, o]) => [name, { status: o.status, results: o.results, error: o.error?.split('\n')[0] ?? null }]),
      );
    });
    worker.register<{ lang: string }>(children, (job) => {
      if (job.payload.lang === 'fr') throw new PermanentError('no French today');
      return { text: job.payload.lang.toUpperCase() };
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, parents, { langs: ['de', 'fr'] });
      const res = await waitJob(pool, parents, id, { timeout: '20 seconds' });
      assert.equal(res.status, 'done');
      assert.deepEqual(res.result, {
        de: { status: 'done', results: { translate: { text: 'DE' } }, error: null },
        fr: { status: 'failed', results: {}, error: 'PermanentError: no French today' },
      });
      assert.equal(parentRuns, 2, 'parked once, run again with the outcomes');
    });
  });

  test('waitJob and waitWorkflow return what the worker produced', async () => {
    const queue = uniqueQueue('results');
    const worker = testWorker();
    worker.register<{ n: number }>(queue, async (job) => {
      await delay(200);
      return { double: (job.payload?.n ?? 0) * 2 };
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, { n: 21 });
      const started = Date.now();
      const res = await waitJob(pool, queue, id, { timeout: '10 seconds' });
      assert.deepEqual(res, { status: 'done', result: { double: 42 }, error: null, finished: true, ok: true });
      assert.ok(Date.now() - started < 5000);
      const wf = await submit(pool, { queue, steps: [{ name: 'one', payload: { n: 1 } }, { name: 'two', after: ['one'], payload: { n: 2 } }] });
      const wres = await waitWorkflow(pool, wf, { timeout: '10 seconds' });
      assert.deepEqual(wres, { status: 'done', result: { two: { double: 4 } }, error: null, finished: true, ok: true });
    });
  });

  test('signalWithStart starts one workflow and its step gets the event', async () => {
    const queue = uniqueQueue('carts');
    const worker = testWorker();
    worker.register(queue, async (job) => {
      return job.awaitEvent(`${job.payload}:item`);
    });
    const key = `cart-${queue}`;
    const spec = { key, queue, steps: [{ name: 'checkout', payload: key }] };
    const first = await signalWithStart(pool, spec, `${key}:item`, { sku: 'A-1' });
    await withWorker(worker, async () => {
      const res = await waitWorkflow(pool, first, { timeout: '10 seconds' });
      assert.equal(res.status, 'done');
      assert.deepEqual(res.result, { checkout: { sku: 'A-1' } });
    });
    const [{ n }] = await q('SELECT count(*)::int AS n FROM wf.workflows WHERE key = $1', [key]);
    assert.equal(n, 1);
  });

  test('complete(result, steps) fans out at run time; the join gets every result', async () => {
    const queue = uniqueQueue('fanout');
    const worker = testWorker({ concurrency: 2 });
    worker.register<{ n?: number }>(queue, async (job) => {
      if (job.step === 'split') {
        await job.complete({ chapters: 3 }, [
          ...[1, 2, 3].map((n) => ({ name: `ch${n}`, after: ['split'], payload: { n } })),
          { name: 'bind', after: ['ch1', 'ch2', 'ch3'] },
        ]);
        return;
      }
      if (job.step === 'bind') {
        const pages = Object.values(job.inputs).map((r: any) => r.pages ?? 0);
        return { total: pages.reduce((a, b) => a + b, 0), inputs: Object.keys(job.inputs).sort() };
      }
      return { pages: 10 * job.payload.n! };
    });
    await withWorker(worker, async () => {
      const wf = await submit(pool, { name: 'book', queue, steps: [{ name: 'split' }] });
      const res = await waitWorkflow(pool, wf, { timeout: '10 seconds' });
      assert.equal(res.status, 'done');
      assert.deepEqual(res.result, { bind: { total: 60, inputs: ['ch1', 'ch2', 'ch3'] } });
    });
  });

  test('progress is visible while the job runs', async () => {
    const queue = uniqueQueue('progress');
    const worker = testWorker();
    const gate = deferred();
    worker.register(queue, async (job) => {
      await job.progress({ done: 1, of: 3 });
      await gate.promise;
      return 'ok';
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, {});
      const row = await eventually(async () => {
        const r = await jobRow(queue, id);
        return r?.progress ? r : undefined;
      }, 'the progress');
      assert.equal(row.status, 'running');
      assert.deepEqual(row.progress, { done: 1, of: 3 });
      gate.resolve();
      assert.equal((await waitJob(pool, queue, id, { timeout: '10 seconds' })).status, 'done');
    });
  });

  test('handlers per workflow step; a step without one fails with a clear error', async () => {
    const queue = uniqueQueue('steps');
    const worker = testWorker({ concurrency: 2 });
    worker.register(queue, (job) => ({ by: 'fetch', payload: job.payload }), { step: 'fetch' });
    worker.register(queue, (job) => ({ by: 'default', inputs: job.inputs }));
    worker.register(queue, () => ({ by: 'publish' }), { step: 'publish' });
    await withWorker(worker, async () => {
      const wf = await submit(pool, {
        queue,
        steps: [{ name: 'fetch', payload: 1 }, { name: 'summarize', after: ['fetch'] }, { name: 'publish', after: ['summarize'] }],
      });
      const res = await waitWorkflow<any>(pool, wf, { timeout: '10 seconds' });
      assert.deepEqual(res.result, { publish: { by: 'publish' } });
      const steps = await q('SELECT step_name, result FROM wf.jobs WHERE workflow_id = $1 ORDER BY id', [wf]);
      assert.deepEqual(steps.map((r) => r.result.by), ['fetch', 'default', 'publish']);
      assert.deepEqual(steps[1].result.inputs, { fetch: { by: 'fetch', payload: 1 } });
    });
    const only = testWorker();
    only.register(queue, () => 'x', { step: 'known' });
    await withWorker(only, async () => {
      const id = await enqueue(pool, queue, {}, { stepName: 'unknown', maxAttempts: 1 });
      const row = await waitStatus(queue, id, 'failed');
      assert.match(row.last_error, /has no handler for step "unknown"/);
    });
  });

  test('a transaction the handler left open is rolled back before the job completes', async () => {
    await ensureEffects();
    const queue = uniqueQueue('open-tx');
    const logger = new MemoryLogger();
    const worker = testWorker({ logger });
    worker.register(queue, async (job) => {
      await job.client.query('BEGIN');
      await job.client.query(`INSERT INTO ${EFFECTS} (queue, job_id, attempt, note) VALUES ($1, $2, $3, 'forgotten')`, [
        job.queue,
        job.id,
        job.attempt,
      ]);
      return 'returned without COMMIT';
    });
    await withWorker(worker, async () => {
      const id = await enqueue(pool, queue, {});
      const res = await waitJob(pool, queue, id, { timeout: '10 seconds' });
      assert.equal(res.result, 'returned without COMMIT');
      assert.equal((await q(`SELECT 1 FROM ${EFFECTS} WHERE queue = $1`, [queue])).length, 0);
      assert.ok(logger.has('warn', /left a transaction open; rolled back/));
    });
  });

  test('a slot whose session is killed connects again and goes on', async () => {
    const queue = uniqueQueue('reconnect');
    const worker = testWorker({ claimWait: 30_000 });
    worker.register(queue, (job) => ({ attempt: job.attempt }));
    await withWorker(worker, async () => {
      const waiting = async () =>
        (await q(
          `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query LIKE '%wf_claim(%'`,
          [`pg_wf ${worker.name}`],
        ))[0]?.pid;
      const pid = await eventually(waiting, 'the waiting claim');
      await q('SELECT pg_terminate_backend($1)', [pid]);
      const next = await eventually(async () => {
        const p = await waiting();
        return p && p !== pid ? p : undefined;
      }, 'a new waiting claim');
      assert.notEqual(next, pid);
      const id = await enqueue(pool, queue, {});
      assert.deepEqual((await waitJob(pool, queue, id, { timeout: '10 seconds' })).result, { attempt: 1 });
    });
  });

  test('versions: a worker claims only the versions it runs', async () => {
    const queue = uniqueQueue('versions');
    const worker = testWorker({ versions: ['v2'] });
    worker.register(queue, (job) => job.payload);
    await withWorker(worker, async () => {
      const v1 = await enqueue(pool, queue, 'old', { version: 'v1' });
      const v2 = await enqueue(pool, queue, 'new', { version: 'v2' });
      assert.equal((await waitJob(pool, queue, v2, { timeout: '10 seconds' })).result, 'new');
      await delay(300);
      assert.equal((await jobRow(queue, v1)).status, 'pending', 'v1 is left to v1 workers');
    });
  });

  test('stop lets in-flight jobs finish; past its timeout it gives them back', async () => {
    const queue = uniqueQueue('stop');
    const logger = new MemoryLogger();
    const worker = testWorker({ logger, concurrency: 2, shutdownRetryIn: 60_000 });
    let abortedBy: unknown;
    worker.register<{ ms: number }>(queue, async (job) => {
      const timer = delay(job.payload.ms, undefined, { signal: job.signal }).catch(() => {
        abortedBy = job.signal.reason;
      });
      await timer;
      return { slept: job.payload.ms };
    });
    await worker.start();
    const quick = await enqueue(pool, queue, { ms: 600 });
    const slow = await enqueue(pool, queue, { ms: 30_000 });
    await waitStatus(queue, quick, 'running');
    await waitStatus(queue, slow, 'running');
    const started = Date.now();
    await worker.stop({ timeout: 1500 });
    const took = Date.now() - started;
    assert.ok(took >= 1400 && took < 5000, `stop took ${took} ms`);
    assert.equal((await jobRow(queue, quick)).status, 'done', 'the quick one finished');
    const row = await jobRow(queue, slow);
    assert.equal(row.status, 'pending', 'the slow one is back in the queue');
    assert.equal(row.attempt, 1);
    assert.match(row.last_error, /shut down: the job was given back after 1500 ms/);
    assert.ok(new Date(row.run_at).getTime() > Date.now() + 30_000, 'with the retry delay asked for');
    await eventually(() => abortedBy instanceof JobLost, 'the abort of the given-back job');
    assert.ok(logger.has('warn', /still running at shutdown, given back \(wf_fail -> pending\)/), JSON.stringify(logger.lines));
    const [{ n }] = await q(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1`, [
      `pg_wf ${worker.name}%`,
    ]);
    assert.equal(n, 0, 'every connection of the worker is closed');
  });

  test('a job whose handler holds a transaction at shutdown is given back all the same', async () => {
    const queue = uniqueQueue('stop-in-tx');
    const worker = testWorker();
    worker.register(queue, async (job) => {
      await job.transaction(async (tx) => {
        await job.checkpoint('inside', () => 'a checkpoint in the transaction');
        await tx.query('SELECT pg_sleep(60)'); // busy in the server, holding its locks
      });
    });
    await worker.start();
    const id = await enqueue(pool, queue, {});
    await eventually(async () => {
      const rows = await q(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE '%pg_sleep%'`, [
        `pg_wf ${worker.name}`,
      ]);
      return rows.length > 0;
    }, 'the handler in its transaction');
    const started = Date.now();
    await worker.stop({ timeout: 200 });
    assert.ok(Date.now() - started < 8000, `stopped in ${Date.now() - started} ms`);
    const row = await jobRow(queue, id);
    assert.equal(row.status, 'pending');
    assert.match(row.last_error, /given back|lost/);
    const [{ n }] = await q(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1`, [
      `pg_wf ${worker.name}%`,
    ]);
    assert.equal(n, 0, 'the handler\'s session was ended');
  });

  test('start rejects a connection that does not work', async () => {
    const worker = testWorker({ connection: 'postgresql://nobody@127.0.0.1:1/nowhere' });
    worker.register('never', () => null);
    await assert.rejects(worker.start(), /ECONNREFUSED|connect/);
    await worker.stopped;
  });

  test('logging goes through the injected logger, quiet by default', async () => {
    const queue = uniqueQueue('logging');
    const all = new MemoryLogger();
    const quiet = new MemoryLogger();
    for (const [logger, level] of [[all, 'debug'], [quiet, 'warn']] as const) {
      const worker = testWorker({ logger: levelLogger(level, logger) });
      worker.register(queue, () => null);
      await withWorker(worker, async () => {
        const id = await enqueue(pool, queue, {});
        await waitJob(pool, queue, id, { timeout: '10 seconds' });
      });
    }
    assert.ok(all.has('debug', /claimed by/) && all.has('debug', /: completed/) && all.has('info', / x1$/), JSON.stringify(all.lines));
    assert.deepEqual(quiet.lines, []);
  });
});

// Keep the type import used: a handler can be typed by its payload and result.
export type _Typed = Job<{ n: number }, { double: number }>;
