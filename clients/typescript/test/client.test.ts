// The producer's functions: one SQL call each, in the caller's transaction.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import {
  cancel,
  cancelWorkflow,
  cancelWhere,
  configureQueue,
  enableSchedule,
  enqueue,
  enqueueBatch,
  workflow,
  retry,
  retryWhere,
  schedule,
  signal,
  signalWithStart,
  submit,
  unschedule,
  waitJob,
  waitWorkflow,
} from 'pg-wf';

import { jobRow, pool, q, uniqueQueue } from './helpers.js';

after(() => pool.end());

describe('client', () => {
  test('enqueue joins the caller\'s transaction', async () => {
    const queue = uniqueQueue('tx');
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const rolledBack = await enqueue(client, queue, { n: 1 });
      await client.query('ROLLBACK');
      assert.equal(await jobRow(queue, rolledBack), undefined, 'a rolled back enqueue leaves no job');

      await client.query('BEGIN');
      const id = await enqueue(client, queue, [1, 'two', { three: 3 }]);
      assert.equal(typeof id, 'number');
      // not visible outside the transaction before its commit
      assert.equal(await jobRow(queue, id), undefined);
      await client.query('COMMIT');
      const row = await jobRow(queue, id);
      assert.equal(row.status, 'pending');
      assert.deepEqual(row.payload, [1, 'two', { three: 3 }], 'an array payload stays JSON');
    } finally {
      client.release();
    }
  });

  test('enqueue options reach wf_enqueue', async () => {
    const queue = uniqueQueue('opts');
    const runAt = new Date(Date.now() + 3600_000);
    const id = await enqueue(pool, queue, { a: 1 }, {
      priority: 7,
      runAt,
      maxAttempts: 2,
      idempotencyKey: 'order-17',
      key: 'tenant-a',
      version: 'v3',
      maxRunTime: 60_000,
    });
    const again = await enqueue(pool, queue, { a: 1 }, { idempotencyKey: 'order-17' });
    assert.equal(again, id, 'the same idempotency key returns the same job');
    const row = await jobRow(queue, id);
    assert.equal(row.priority, 7);
    assert.equal(row.max_attempts, 2);
    assert.equal(row.key, 'tenant-a');
    assert.equal(row.version, 'v3');
    assert.equal(row.idempotency_key, 'order-17');
    assert.equal(new Date(row.run_at).getTime(), runAt.getTime());
    const [{ secs }] = await q('SELECT extract(epoch FROM max_run_time)::int AS secs FROM wf.jobs WHERE id = $1', [id]);
    assert.equal(secs, 60);

    const parent = await enqueue(pool, queue, {}, { stepName: 'first' });
    const child = await enqueue(pool, queue, {}, { dependsOn: [parent], stepName: 'second' });
    assert.equal((await jobRow(queue, child)).status, 'blocked');
  });

  test('enqueueBatch: ids in order, one key per payload', async () => {
    const queue = uniqueQueue('batch');
    const ids = await enqueueBatch(pool, queue, [{ n: 1 }, { n: 2 }, { n: 3 }], { keys: ['a', null, 'c'] });
    assert.equal(ids.length, 3);
    assert.ok(ids[0] < ids[1] && ids[1] < ids[2]);
    const rows = await q('SELECT id, payload, key FROM wf.jobs WHERE queue = $1 ORDER BY id', [queue]);
    assert.deepEqual(rows.map((r) => [Number(r.id), r.payload.n, r.key]), [[ids[0], 1, 'a'], [ids[1], 2, null], [ids[2], 3, 'c']]);
  });

  test('submit, workflow, cancelWorkflow', async () => {
    const queue = uniqueQueue('wf');
    const id = await submit(pool, {
      name: 'report',
      queue,
      steps: [{ name: 'fetch', payload: { url: 'x' } }, { name: 'publish', after: ['fetch'] }],
    });
    assert.match(id, /^[0-9a-f-]{36}$/);
    const wf = await workflow(pool, id);
    assert.equal(wf.status, 'running');
    assert.deepEqual(wf.steps.map((s: any) => s.name).sort(), ['fetch', 'publish']);
    assert.equal(await cancelWorkflow(pool, id), 2);
    assert.equal((await workflow(pool, id)).status, 'cancelled');
  });

  test('signal, waitJob, cancel, retry, configureQueue', async () => {
    const queue = uniqueQueue('ops');
    assert.equal(await signal(pool, `nobody-waits-${queue}`, { x: 1 }), 0);
    const id = await enqueue(pool, queue, {});
    const waited = await waitJob(pool, queue, id, { timeout: 100 });
    assert.equal(waited.status, 'pending', 'a wait that times out returns the status then');
    assert.equal(await cancel(pool, queue, id), true);
    const ended = await waitJob(pool, queue, id, { timeout: '1 second' });
    assert.equal(ended.status, 'cancelled');
    assert.equal(ended.result, null);
    assert.equal(await retry(pool, queue, id), true);
    assert.equal((await jobRow(queue, id)).status, 'pending');
    await configureQueue(pool, queue, { paused: true, maxAttempts: 9 });
    assert.equal((await q('SELECT * FROM wf_claim($1)', [queue])).length, 0, 'a paused queue hands out nothing');
    const later = await enqueue(pool, queue, {});
    assert.equal((await jobRow(queue, later)).max_attempts, 9);
  });

  test('retryWhere, cancelWhere, schedule, enableSchedule, unschedule', async () => {
    const queue = uniqueQueue('bulk');
    const ids = await enqueueBatch(pool, queue, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    assert.equal(await cancelWhere(pool, queue, { ids: ids.slice(0, 2) }), 2);
    assert.equal((await jobRow(queue, ids[2]!)).status, 'pending');
    assert.equal(await retryWhere(pool, queue, { ids: [ids[0]!] }), 1);
    assert.deepEqual(
      (await q('SELECT id, status FROM wf.jobs WHERE queue = $1 ORDER BY id', [queue])).map((r) => r.status),
      ['pending', 'cancelled', 'pending'],
    );
    assert.equal(await cancelWhere(pool, queue, { statuses: ['pending'], maxJobs: 10 }), 2);
    assert.equal(await retryWhere(pool, queue, { errorContains: 'CANCEL' }), 3, 'error text matched case-insensitively');

    const name = `ts-${queue}`;
    const next = await schedule(pool, name, '*/5 * * * *', queue, { kind: 'tick' });
    assert.ok(next instanceof Date && next.getTime() > Date.now());
    assert.equal(await enableSchedule(pool, name, false), true);
    const [row] = await q('SELECT enabled FROM wf.schedules WHERE name = $1', [name]);
    assert.equal(row.enabled, false);
    assert.equal(await unschedule(pool, name), true);
    assert.equal(await enableSchedule(pool, name, true), false);
  });

  test('signalWithStart: one workflow per key', async () => {
    const queue = uniqueQueue('sws');
    const spec = { key: `cart-${queue}`, queue, steps: [{ name: 'checkout' }] };
    const first = await signalWithStart(pool, spec, `${queue}:item`, { sku: 'A-1' });
    const second = await signalWithStart(pool, spec, `${queue}:item`, { sku: 'B-2' });
    assert.equal(second, first);
    const wf = await waitWorkflow(pool, first, { timeout: 10 });
    assert.equal(wf.status, 'running');
  });
});
