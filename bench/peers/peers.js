#!/usr/bin/env node
// pg_wf next to graphile-worker and pg-boss, on the benchmark's cluster, all
// four systems driven from this one Node runtime with the same `pg` client
// (scripts/bench-peers.sh runs it; it empties each system's tables before).
//
//   peers.js setup                 install the peers' schemas and queues
//   peers.js drain SYSTEM [opts]   pre-enqueue --jobs jobs, then time the
//                                  workers that run them all (no-op handlers)
//   peers.js wake SYSTEM [opts]    commit-to-handler latency, one job at a time
//   SYSTEM: wf (pg_wf), base (plain SKIP LOCKED table), gw (graphile-worker),
//           boss (pg-boss)
//   opts: --jobs N --workers N --batch N --wake-jobs N
//
// Connects with PGHOST/PGPORT (user postgres, database bench). Prints one JSON
// object per run on stdout; exits non-zero when a job was not handled.
'use strict'

const { fork } = require('node:child_process')
const { parseArgs } = require('node:util')
const pg = require('pg')
const { run, makeWorkerUtils, Logger } = require('graphile-worker')
const PgBoss = require('pg-boss')

const conn = {
  host: process.env.PGHOST,
  port: Number(process.env.PGPORT || 5432),
  user: 'postgres',
  database: 'bench'
}
const QUEUE = { drain: 'peers_drain', wake: 'peers_wake' }
const CHANNEL = 'bench_peers_wake' // the baseline's LISTEN/NOTIFY channel
// pg-boss v10 refuses a polling interval below 0.5 s: it has no other wake-up.
const BOSS_POLL_S = 0.5

const now = () => process.hrtime.bigint() // CLOCK_MONOTONIC, shared by processes
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const log = msg => process.stderr.write(`[peers] ${msg}\n`)
const fail = msg => { log(`FAILED: ${msg}`); process.exit(1) }

async function connect () {
  const c = new pg.Client(conn)
  await c.connect()
  return c
}
async function count (c, text, values) {
  return Number((await c.query(text, values)).rows[0].count)
}
function payloads (from, n) {
  return Array.from({ length: n }, (_, i) => ({ n: from + i, to: 'user@example.com' }))
}
async function chunked (n, size, fn) {
  for (let from = 0; from < n; from += size) await fn(from, Math.min(size, n - from))
}

// `workers` loops, each on a connection of its own, each calling `body`
// until stopped. Returns the function that stops them.
async function loops (workers, setup, body) {
  let stopping = false
  const clients = await Promise.all(Array.from({ length: workers }, connect))
  for (const c of clients) await setup(c)
  const running = clients.map(async c => {
    while (!stopping) await body(c)
  }).map(p => p.catch(e => fail(e.stack)))
  return async () => {
    stopping = true
    await Promise.all(running)
    await Promise.all(clients.map(c => c.end()))
  }
}

// A pool for graphile-worker, which asks for error handlers on the pool and
// on each of its clients.
function gwPool (max) {
  const pool = new pg.Pool({ ...conn, max })
  pool.on('error', e => fail(`graphile-worker's pool: ${e.message}`))
  pool.on('connect', client => client.on('error', e => fail(`graphile-worker's client: ${e.message}`)))
  return pool
}

// Only the peers' warnings and errors: their info lines name every job.
const quiet = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') log(`graphile-worker ${level}: ${message}`)
})

// Each system: fill (bulk enqueue, untimed), enqueue (one job, inside the
// caller's transaction), unfinished (jobs not yet recorded as done), and
// start (workers with the given concurrency and batch size calling onJob
// with each job's payload; returns their stop function).
const systems = {
  wf: {
    name: 'pg_wf',
    async fill (c, queue, n) {
      await chunked(n, 5000, (from, k) =>
        c.query('SELECT count(*) FROM wf_enqueue_batch($1, $2)', [queue, JSON.stringify(payloads(from, k))]))
    },
    enqueue: (c, queue, payload) => c.query('SELECT wf_enqueue($1, $2)', [queue, payload]),
    unfinished: (c, queue) =>
      count(c, "SELECT count(*) FROM wf.jobs WHERE queue = $1 AND status <> 'done'", [queue]),
    // wf_claim blocks up to `wait` and is woken at the enqueuer's commit;
    // the batch is completed in one statement.
    start: ({ queue, workers, batch }, onJob) => loops(workers, async () => {}, async c => {
      const { rows } = await c.query(
        "SELECT id, attempt, payload FROM wf_claim($1, max_jobs => $2, wait => '1s')", [queue, batch])
      if (rows.length === 0) return
      for (const r of rows) await onJob(r.payload)
      await c.query('SELECT count(*) FROM wf_complete_many($1, $2::bigint[], $3::int[])',
        [queue, rows.map(r => r.id), rows.map(r => r.attempt)])
    })
  },

  base: {
    name: 'SKIP LOCKED table',
    async fill (c, queue, n) {
      await chunked(n, 5000, (from, k) => c.query(
        'INSERT INTO baseline_jobs (queue, payload) SELECT $1, p FROM jsonb_array_elements($2::jsonb) p',
        [queue, JSON.stringify(payloads(from, k))]))
    },
    async enqueue (c, queue, payload) {
      await c.query('INSERT INTO baseline_jobs (queue, payload) VALUES ($1, $2)', [queue, payload])
      await c.query(`NOTIFY ${CHANNEL}`)
    },
    unfinished: (c, queue) =>
      count(c, "SELECT count(*) FROM baseline_jobs WHERE queue = $1 AND status <> 'done'", [queue]),
    // The claim of bench/base_claim100.sql; an empty claim sleeps until a
    // NOTIFY (one that arrived during the claim is not lost: see `notified`).
    start: ({ queue, workers, batch }, onJob) => loops(workers, async c => {
      c.on('notification', () => { c.notified = true; if (c.wake) c.wake() })
      await c.query(`LISTEN ${CHANNEL}`)
    }, async c => {
      c.notified = false
      const { rows } = await c.query(`
        UPDATE baseline_jobs SET status = 'running', attempts = attempts + 1, started_at = now()
         WHERE id = ANY(ARRAY(SELECT id FROM baseline_jobs
                               WHERE status = 'pending' AND queue = $1 AND run_at <= now()
                               ORDER BY priority DESC, run_at, id
                               FOR UPDATE SKIP LOCKED LIMIT $2))
        RETURNING id, payload`, [queue, batch])
      if (rows.length === 0) {
        if (!c.notified) await new Promise(resolve => { c.wake = resolve; setTimeout(resolve, 1000) })
        c.wake = null
        return
      }
      for (const r of rows) await onJob(r.payload)
      await c.query("UPDATE baseline_jobs SET status = 'done', finished_at = now() WHERE id = ANY($1::bigint[])",
        [rows.map(r => r.id)])
    })
  },

  gw: {
    name: 'graphile-worker',
    async fill (c, queue, n) {
      const pool = gwPool(2)
      const utils = await makeWorkerUtils({ pgPool: pool, logger: quiet })
      try {
        await chunked(n, 5000, (from, k) =>
          utils.addJobs(payloads(from, k).map(payload => ({ identifier: queue, payload }))))
      } finally { await utils.release(); await pool.end() }
    },
    // add_job is graphile-worker's SQL API; it NOTIFYs jobs:insert.
    enqueue: (c, queue, payload) => c.query('SELECT graphile_worker.add_job($1, $2::json)', [queue, payload]),
    // A finished job is deleted.
    unfinished: (c, queue) =>
      count(c, 'SELECT count(*) FROM graphile_worker.jobs WHERE task_identifier = $1', [queue]),
    // Its batched mode: a local queue of `batch` jobs fetched (and locked) at
    // once, completions of the same tick written in one statement.
    async start ({ queue, workers, batch }, onJob) {
      const pool = gwPool(Math.max(10, workers + 2)) // its advice
      const runner = await run({
        pgPool: pool,
        concurrency: workers,
        noHandleSignals: true,
        logger: quiet,
        crontab: '',
        taskList: { [queue]: async payload => { await onJob(payload) } },
        preset: { worker: { localQueue: { size: batch }, completeJobBatchDelay: 0 } }
      })
      return async () => { await runner.stop(); await pool.end() }
    }
  },

  boss: {
    name: 'pg-boss',
    async fill (c, queue, n) {
      const boss = await startBoss()
      try {
        await chunked(n, 5000, (from, k) =>
          boss.insert(payloads(from, k).map(data => ({ name: queue, data }))))
      } finally { await boss.stop({ graceful: false }) }
    },
    // send() into the caller's transaction, through pg-boss's `db` option.
    async enqueue (c, queue, payload) {
      enqueueBoss = enqueueBoss || new PgBoss({ ...conn, max: 1 })
      await enqueueBoss.send(queue, payload, { db: { executeSql: (text, values) => c.query(text, values) } })
    },
    unfinished: (c, queue) =>
      count(c, "SELECT count(*) FROM pgboss.job WHERE name = $1 AND state <> 'completed'", [queue]),
    // pg-boss v10 has no teamSize: concurrency is one work() loop per worker,
    // each fetching up to `batch` jobs per poll and completing them together.
    async start ({ queue, workers, batch }, onJob) {
      const boss = await startBoss()
      for (let i = 0; i < workers; i++) {
        await boss.work(queue, { batchSize: batch, pollingIntervalSeconds: BOSS_POLL_S }, async jobs => {
          for (const j of jobs) await onJob(j.data)
        })
      }
      return async () => { await boss.stop({ graceful: true, timeout: 5000 }) }
    }
  }
}
let enqueueBoss = null
async function startBoss () {
  // Defaults otherwise (maintenance included), without the cron clock: no
  // schedule is used.
  const boss = new PgBoss({ ...conn, max: 10, schedule: false })
  boss.on('error', e => fail(`pg-boss: ${e.stack || e.message}`))
  await boss.start()
  return boss
}

async function setup () {
  const pool = gwPool(2)
  const utils = await makeWorkerUtils({ pgPool: pool, logger: quiet })
  await utils.migrate()
  await utils.release()
  await pool.end()
  const boss = await startBoss()
  for (const q of Object.values(QUEUE)) await boss.createQueue(q)
  await boss.stop({ graceful: false })
  const version = name => require(`${name}/package.json`).version
  console.log(JSON.stringify({ 'graphile-worker': version('graphile-worker'), 'pg-boss': version('pg-boss'), pg: version('pg') }))
}

// Until `check` returns true, every `ms`; fails after `limitS` seconds.
async function until (check, ms, limitS, what) {
  const deadline = Date.now() + limitS * 1000
  while (!(await check())) {
    if (Date.now() > deadline) fail(`${what} after ${limitS} s`)
    await sleep(ms)
  }
}
// A promise and its resolve function; fails after `limitS` seconds.
function deadline (limitS, what) {
  let resolve
  const promise = new Promise(r => { resolve = r })
  const timer = setTimeout(() => fail(`${what()} after ${limitS} s`), limitS * 1000)
  return { promise, resolve: v => { clearTimeout(timer); resolve(v) } }
}

// Pre-enqueue `jobs`, then time from the first handler starting to the
// moment the system's tables say every job is finished (so the peers'
// deferred completions are counted too).
async function drain (sys, { jobs, workers, batch }) {
  const queue = QUEUE.drain
  const c = await connect()
  if (await sys.unfinished(c, queue) !== 0) fail(`${sys.name}: the queue is not empty before the run`)
  const t0 = now()
  await sys.fill(c, queue, jobs)
  const enqueueS = Number(now() - t0) / 1e9
  if (await sys.unfinished(c, queue) !== jobs) fail(`${sys.name}: ${jobs} jobs enqueued, the table holds another count`)
  // As bench.sh's settle: statistics of the filled tables, no dirty pages left.
  await c.query('VACUUM ANALYZE')
  await c.query('CHECKPOINT')

  const seen = new Uint8Array(jobs)
  let handled = 0; let distinct = 0; let first = null
  const all = deadline(Math.max(120, jobs / 50), () => `${sys.name}: ${distinct} of ${jobs} jobs handled`)
  const onJob = p => {
    if (first === null) first = now()
    handled++
    if (!(p.n >= 0 && p.n < jobs)) fail(`${sys.name}: a job with payload ${JSON.stringify(p)}`)
    if (seen[p.n]++ === 0 && ++distinct === jobs) all.resolve()
  }
  const stop = await sys.start({ queue, workers, batch }, onJob)
  await all.promise
  await until(async () => await sys.unfinished(c, queue) === 0, 5, 60,
    `${sys.name}: every job handled, but not every job recorded as finished`)
  const seconds = Number(now() - first) / 1e9
  await stop()
  await c.end()
  return {
    system: sys.name,
    jobs,
    seconds: +seconds.toFixed(3),
    per_s: +(jobs / seconds).toFixed(1),
    duplicates: handled - distinct,
    enqueue_per_s: +(jobs / enqueueS).toFixed(0)
  }
}

// Latency from the enqueuer's COMMIT returning to the handler starting, in
// a worker process of its own (one consumer, the drain's batch settings),
// one job at a time with the worker idle. The first WARMUP jobs are not
// counted (connections and prepared statements warming up).
const WARMUP = 5
async function wake (sys, system, { batch, wakeJobs }) {
  const queue = QUEUE.wake
  const child = fork(__filename, ['worker', system, '--batch', String(batch)])
  const arrived = new Set()
  let duplicates = 0; let waiting = deadline(60, () => `${sys.name}: worker did not start`)
  child.on('message', m => {
    if (m === 'ready') return waiting.resolve()
    const [n, t] = m // job n's handler started at t (ns)
    if (arrived.has(n)) duplicates++
    else { arrived.add(n); waiting.resolve([n, BigInt(t)]) }
  })
  child.on('exit', code => { if (code !== 0 && !child.stopping) fail(`${sys.name}: worker exited with ${code}`) })
  await waiting.promise

  // A polling worker must see jobs arrive at any point of its cycle, as in
  // production: without this pause the enqueuer would run in step with it.
  const pollMs = system === 'boss' ? BOSS_POLL_S * 1000 : 0
  const c = await connect()
  const latencies = []; const withCommit = []
  for (let n = 0; n < WARMUP + wakeJobs; n++) {
    await sleep(3 * (0.7 + 0.6 * Math.random()) + pollMs * Math.random())
    waiting = deadline(30, () => `${sys.name}: job ${n} not handled`)
    await c.query('BEGIN')
    await sys.enqueue(c, queue, { n })
    const tBefore = now()
    await c.query('COMMIT')
    const tCommitted = now()
    const [got, started] = await waiting.promise
    if (got !== n) fail(`${sys.name}: enqueued job ${n}, the handler ran job ${got}`)
    if (n < WARMUP) continue
    latencies.push(Number(started - tCommitted) / 1e6)
    withCommit.push(Number(started - tBefore) / 1e6)
  }
  await until(async () => await sys.unfinished(c, queue) === 0, 5, 30,
    `${sys.name}: every job handled, but not every job recorded as finished`)
  await c.end()
  child.stopping = true
  child.send('stop')
  await new Promise(resolve => child.on('exit', resolve))

  const pct = (values, p) => values[Math.min(values.length - 1, Math.round(p / 100 * (values.length - 1)))]
  latencies.sort((a, b) => a - b); withCommit.sort((a, b) => a - b)
  const ms = v => +v.toFixed(3)
  return {
    system: sys.name,
    jobs: latencies.length,
    p50_ms: ms(pct(latencies, 50)),
    p99_ms: ms(pct(latencies, 99)),
    max_ms: ms(latencies[latencies.length - 1]),
    mean_ms: ms(latencies.reduce((a, b) => a + b, 0) / latencies.length),
    p50_incl_commit_ms: ms(pct(withCommit, 50)),
    duplicates
  }
}

// The wake run's worker process: reports each handler start to the parent.
async function worker (sys, { batch }) {
  const stop = await sys.start({ queue: QUEUE.wake, workers: 1, batch },
    p => { process.send([p.n, String(now())]) })
  process.on('message', async m => {
    if (m === 'stop') { await stop(); process.exit(0) }
  })
  process.send('ready')
}

// The Markdown table of the run, from the JSON lines of drain (best of the
// rounds) and wake runs, read on stdin.
async function table ({ workers, batch }) {
  let text = ''
  for await (const chunk of process.stdin) text += chunk
  const rows = text.split('\n').filter(Boolean).map(l => JSON.parse(l))
  const versions = rows.find(r => r['pg-boss']) || {}
  const best = {}; const rounds = {}; const wakeOf = {}
  for (const r of rows) {
    if (r.per_s !== undefined) {
      if (!(best[r.system]?.per_s >= r.per_s)) best[r.system] = r
      ;(rounds[r.system] = rounds[r.system] || []).push(r.per_s)
    }
    if (r.p50_ms !== undefined) wakeOf[r.system] = r
  }
  const how = {
    pg_wf: [`wf_claim(max_jobs => ${batch}) + wf_complete_many`, 'wf_claim(wait => ...)'],
    'SKIP LOCKED table': [`UPDATE ... SKIP LOCKED LIMIT ${batch}, then UPDATE ... = ANY`, 'LISTEN/NOTIFY'],
    'graphile-worker': [`concurrency ${workers}, localQueue.size ${batch}, completeJobBatchDelay 0; addJobs`,
      'LISTEN/NOTIFY (its own)'],
    'pg-boss': [`${workers} x work(batchSize ${batch}, pollingIntervalSeconds ${BOSS_POLL_S}); insert()`,
      `polls every ${BOSS_POLL_S} s (its minimum)`]
  }
  const ref = best.pg_wf?.per_s
  const num = v => v === undefined ? 'n/a' : v >= 100 ? Math.round(v).toLocaleString('en-US') : v >= 10 ? v.toFixed(1) : v.toFixed(2)
  const header = ['system', 'drain (jobs/s)', 'ratio to pg_wf', 'each round', 'wake p50 (ms)', 'wake p99 (ms)',
    'drained with', 'woken by']
  const out = Object.keys(how).map(name => {
    const d = best[name]; const w = wakeOf[name]
    const version = name === 'graphile-worker' || name === 'pg-boss' ? ` ${versions[name]}` : ''
    const dup = (d?.duplicates || 0) + (w?.duplicates || 0)
    return [name + version, num(d?.per_s), d && ref ? `${(d.per_s / ref).toFixed(2)}x` : 'n/a',
      (rounds[name] || []).map(num).join(' / '), num(w?.p50_ms), num(w?.p99_ms), how[name][0] + (dup ? `; ${dup} jobs ran twice` : ''), how[name][1]]
  })
  const widths = header.map((h, i) => Math.max(h.length, ...out.map(r => r[i].length)))
  const line = cells => '| ' + cells.map((c, i) => c.padEnd(widths[i])).join(' | ') + ' |'
  console.log(line(header))
  console.log('|' + widths.map(w => '-'.repeat(w + 2)).join('|') + '|')
  for (const r of out) console.log(line(r))
}

async function main () {
  const { values: o, positionals: [cmd, system] } = parseArgs({
    allowPositionals: true,
    options: {
      jobs: { type: 'string', default: '50000' },
      workers: { type: 'string', default: '8' },
      batch: { type: 'string', default: '100' },
      'wake-jobs': { type: 'string', default: '1000' }
    }
  })
  const opts = { jobs: +o.jobs, workers: +o.workers, batch: +o.batch, wakeJobs: +o['wake-jobs'] }
  if (cmd === 'setup') return setup()
  if (cmd === 'table') return table(opts)
  const sys = systems[system]
  if (!sys) fail(`unknown system ${system}: one of ${Object.keys(systems).join(', ')}`)
  if (cmd === 'drain') console.log(JSON.stringify(await drain(sys, opts)))
  else if (cmd === 'wake') console.log(JSON.stringify(await wake(sys, system, opts)))
  else if (cmd === 'worker') return worker(sys, opts)
  else fail(`unknown command ${cmd}`)
  await enqueueBoss?.stop({ graceful: false })
  process.exit(0)
}

main().catch(e => fail(e.stack))
