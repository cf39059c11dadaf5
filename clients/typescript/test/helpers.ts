// Shared by the tests: the server under test, unique queue names, waiting for a condition.
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';

import pg from 'pg';

import { Worker, connectionConfig, type Logger, type WorkerOptions } from 'pg-wf';

export const DSN = process.env.PG_WF_TEST_DSN ?? '';
if (!DSN) throw new Error('PG_WF_TEST_DSN is not set (a superuser DSN of a database with CREATE EXTENSION pg_wf)');

export const pool = new pg.Pool({ ...connectionConfig(DSN), max: 8 });

/** A queue name of its own for each test: the suites share one database. */
export function uniqueQueue(what: string): string {
  return `ts.${what}.${randomBytes(4).toString('hex')}`;
}

export async function q<T = any>(text: string, values: unknown[] = []): Promise<T[]> {
  return (await pool.query(text, values)).rows as T[];
}

export async function jobRow(queue: string, id: number): Promise<any> {
  const rows = await q('SELECT * FROM wf.jobs WHERE queue = $1 AND id = $2', [queue, id]);
  return rows[0];
}

/** Polls `fn` (a test's check, not the library's) until it returns a truthy value. */
export async function eventually<T>(fn: () => Promise<T> | T, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${String(last)})`);
    await delay(50);
  }
}

export async function waitStatus(queue: string, id: number, status: string | string[], timeoutMs = 15_000): Promise<any> {
  const want = Array.isArray(status) ? status : [status];
  return eventually(async () => {
    const row = await jobRow(queue, id);
    return row && want.includes(row.status) ? row : undefined;
  }, `job ${queue}/${id} to be ${want.join('|')}`, timeoutMs);
}

/** A logger that keeps every line, for the tests that check what was logged. */
export class MemoryLogger implements Logger {
  lines: { level: string; message: string }[] = [];
  debug(m: string) { this.lines.push({ level: 'debug', message: m }); }
  info(m: string) { this.lines.push({ level: 'info', message: m }); }
  warn(m: string) { this.lines.push({ level: 'warn', message: m }); }
  error(m: string) { this.lines.push({ level: 'error', message: m }); }
  has(level: string, re: RegExp): boolean {
    return this.lines.some((l) => l.level === level && re.test(l.message));
  }
}

/** A worker on the test server that does not take over the test process's signals. */
export function testWorker(options: WorkerOptions = {}): Worker {
  return new Worker({ connection: DSN, handleSignals: false, logger: new MemoryLogger(), claimWait: 5000, ...options });
}

export const EFFECTS = 'ts_client_effects';

export async function ensureEffects(): Promise<void> {
  await pool.query(
    `CREATE TABLE IF NOT EXISTS ${EFFECTS} (queue text, job_id bigint, attempt int, note text, at timestamptz DEFAULT clock_timestamp())`,
  );
}

export { delay };
