// The README's worker, run as written (only its queue renamed, so that no other suite's job in the
// shared database is taken): it enqueues, runs and prints a job, and stops on SIGTERM.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';

import { connectionConfig } from 'pg-wf';

import { DSN, eventually, pool, uniqueQueue } from './helpers.js';

after(() => pool.end());

/** The DSN as a URL, the form the README's `new pg.Pool({ connectionString })` reads. */
function dsnUrl(dsn: string): string {
  const c = connectionConfig(dsn);
  if (c.connectionString) return c.connectionString;
  const auth = c.user ? `${encodeURIComponent(c.user)}${c.password ? `:${encodeURIComponent(String(c.password))}` : ''}@` : '';
  const host = c.host ? encodeURIComponent(c.host) : '';
  return `postgresql://${auth}${host}${c.port ? `:${c.port}` : ''}/${encodeURIComponent(c.database ?? '')}`;
}

// This package's README and the repository's (its section on the worker
// libraries) show the same worker; both run as written.
for (const [name, path, heading] of [
  ['the README', '../README.md', '## A worker'],
  ['the repository README', '../../../README.md', '## Worker libraries'],
] as const)
test(`${name}'s worker runs as written`, async () => {
  const readme = readFileSync(fileURLToPath(new URL(path, import.meta.url)), 'utf8');
  assert.ok(readme.includes(heading), `${path} has a section ${heading}`);
  const section = readme.slice(readme.indexOf(heading));
  const block = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, 'the README has a worker in a js block');
  assert.ok(block.split('\n').length <= 20, 'a short one');
  const queue = uniqueQueue('readme');
  const script = fileURLToPath(new URL('./readme-worker.mjs', import.meta.url));
  writeFileSync(script, block.replaceAll("'emails'", `'${queue}'`));

  const proc = spawn(process.execPath, [script], {
    env: { ...process.env, DATABASE_URL: dsnUrl(DSN), PG_WF_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (out += d));
  const exited = once(proc, 'exit');
  try {
    await eventually(() => /status: 'done'/.test(out), `the job's outcome in the output:\n${out}`, 20_000);
    assert.match(out, /sending to ada@example\.com \(attempt 1\)/);
    assert.match(out, /result: \{ messageId: 'm-\d+' \}/);
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    const [code, signal] = await exited;
    clearTimeout(timer);
    assert.deepEqual([code, signal], [0, null], out);
  } finally {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  }
});
