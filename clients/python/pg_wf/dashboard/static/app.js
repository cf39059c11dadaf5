// pg_wf dashboard: one page, four views (queues, jobs, workflows, schedules),
// hash routes (#/jobs?queue=x), a JSON API at /api/*, polling for live data.
// Vanilla JS, no build step, nothing loaded from the network.
'use strict';

(function () {
  const CSRF = document.querySelector('meta[name="csrf-token"]').content;
  const SVGNS = 'http://www.w3.org/2000/svg';
  const STATUSES = ['blocked', 'pending', 'running', 'waiting', 'done', 'failed', 'cancelled'];
  const COUNT_COLUMNS = new Set(STATUSES.concat(['queue', 'oldest_ready_age', 'oldest_ready_age_seconds']));
  const POLL = { queues: 3000, jobs: 3000, workflows: 3000, workflow: 1500, schedules: 5000 };

  // ---------------------------------------------------------------- helpers

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    append(el, children);
    return el;
  }
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    append(el, children);
    return el;
  }
  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.setAttribute('class', v);
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }
  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }
  // Appends children, flattening arrays and skipping null/false (unlike Node.append).
  function add(el, ...children) { append(el, children); return el; }

  function fmtNum(n) {
    if (n === null || n === undefined) return '—';
    return Number(n).toLocaleString('en-US');
  }
  function fmtDur(sec) {
    if (sec === null || sec === undefined || isNaN(sec)) return '—';
    sec = Math.abs(sec);
    if (sec < 1) return Math.round(sec * 1000) + ' ms';
    if (sec < 60) return (sec < 10 ? sec.toFixed(1) : Math.round(sec)) + ' s';
    if (sec < 3600) return Math.floor(sec / 60) + ' min ' + (Math.round(sec % 60) ? Math.round(sec % 60) + ' s' : '');
    if (sec < 86400) return Math.floor(sec / 3600) + ' h ' + Math.round((sec % 3600) / 60) + ' min';
    return Math.floor(sec / 86400) + ' d ' + Math.round((sec % 86400) / 3600) + ' h';
  }
  // Relative to the server's clock (each response carries its `now`).
  let serverSkew = 0; // server now - browser now, ms
  function serverNow() { return Date.now() + serverSkew; }
  function noteNow(now) { if (now) serverSkew = Date.parse(now) - Date.now(); }
  // Coarse, for a table cell: "42 s ago", "8 min ago", "in 3 h 5 min".
  function fmtRough(sec) {
    if (sec < 90) return Math.round(sec) + ' s';
    if (sec < 3600) return Math.round(sec / 60) + ' min';
    if (sec < 86400) return Math.floor(sec / 3600) + ' h ' + Math.round((sec % 3600) / 60) + ' min';
    return Math.floor(sec / 86400) + ' d ' + Math.round((sec % 86400) / 3600) + ' h';
  }
  function fmtAgo(ts) {
    if (!ts) return '—';
    const d = (serverNow() - Date.parse(ts)) / 1000;
    if (Math.abs(d) < 1) return 'now';
    return d >= 0 ? fmtRough(d) + ' ago' : 'in ' + fmtRough(-d);
  }
  function fmtTime(ts) {
    if (!ts) return '';
    const d = new Date(ts);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC').replace(/Z$/, ' UTC');
  }
  function timeCell(ts) { return ts ? h('span', { class: 'time', title: fmtTime(ts), text: fmtAgo(ts) }) : h('span', { class: 'muted', text: '—' }); }
  function secondsBetween(a, b) { return (a && b) ? (Date.parse(b) - Date.parse(a)) / 1000 : null; }
  function trunc(str, n) { str = String(str ?? ''); return str.length > n ? str.slice(0, n - 1) + '…' : str; }
  function pretty(v) { return v === null || v === undefined ? '—' : JSON.stringify(v, null, 2); }
  function badge(status) { return h('span', { class: 'badge st-' + status, 'data-status': status, text: status }); }

  // ---------------------------------------------------------------- API

  class ApiError extends Error {
    constructor(status, body) {
      super(body && body.error ? body.error : 'HTTP ' + status);
      this.status = status;
      this.sqlstate = body && body.sqlstate;
      this.hint = body && body.hint;
      this.detail = body && body.detail;
    }
  }
  async function api(path, params) {
    const qs = params ? '?' + new URLSearchParams(Object.entries(params).filter(([, v]) => v !== '' && v !== null && v !== undefined)).toString() : '';
    const r = await fetch(path + qs, { headers: { Accept: 'application/json' }, cache: 'no-store' });
    const body = await r.json().catch(() => null);
    if (!r.ok) throw new ApiError(r.status, body);
    if (body && body.now) noteNow(body.now);
    return body;
  }
  async function post(path, body) {
    const r = await fetch(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': CSRF, Accept: 'application/json' },
      body: JSON.stringify(body),
    });
    const out = await r.json().catch(() => null);
    if (!r.ok) throw new ApiError(r.status, out);
    return out;
  }
  // An action from a button: disables it while it runs, reports the outcome,
  // then refreshes the view.
  async function act(button, path, body) {
    if (button) button.disabled = true;
    try {
      const out = await post(path, body);
      notify(out.message || 'done', out.ok === false ? 'warn' : 'ok');
      return out;
    } catch (e) {
      showError(e);
      return null;
    } finally {
      if (button) button.disabled = false;
      refreshNow();
    }
  }

  // ---------------------------------------------------------------- banner

  const banner = document.getElementById('banner');
  let bannerTimer = null;
  function notify(msg, kind) {
    clearTimeout(bannerTimer);
    banner.hidden = false;
    banner.className = 'banner ' + (kind || 'ok');
    banner.removeAttribute('data-sqlstate');
    add(clear(banner), h('span', { class: 'msg', text: msg }), closeButton());
    if (kind !== 'error') bannerTimer = setTimeout(() => { banner.hidden = true; }, 5000);
  }
  function showError(e) {
    clearTimeout(bannerTimer);
    banner.hidden = false;
    banner.className = 'banner error';
    const state = e.sqlstate ? ' (SQLSTATE ' + e.sqlstate + ')' : '';
    let msg = e.message + state;
    if (e.sqlstate === '42501') msg += ' — the dashboard\u2019s role lacks this right; see wf_grant';
    if (e.sqlstate) banner.setAttribute('data-sqlstate', e.sqlstate); else banner.removeAttribute('data-sqlstate');
    add(clear(banner), h('span', { class: 'msg', text: msg }), e.hint ? h('span', { class: 'hint', text: e.hint }) : null, closeButton());
  }
  function closeButton() {
    return h('button', { class: 'close', title: 'dismiss', 'aria-label': 'dismiss', onclick: () => { banner.hidden = true; } }, '×');
  }

  // ---------------------------------------------------------------- routing & polling

  function parseRoute() {
    const raw = location.hash.replace(/^#\/?/, '');
    const [path, query] = raw.split('?');
    const parts = (path || 'queues').split('/').filter(Boolean);
    const params = Object.fromEntries(new URLSearchParams(query || ''));
    return { tab: parts[0] || 'queues', id: parts[1] ? decodeURIComponent(parts[1]) : null, params };
  }
  function routeHref(tab, id, params) {
    const qs = new URLSearchParams(Object.entries(params || {}).filter(([, v]) => v !== '' && v !== null && v !== undefined)).toString();
    return '#/' + tab + (id ? '/' + encodeURIComponent(id) : '') + (qs ? '?' + qs : '');
  }
  function go(tab, id, params) { location.hash = routeHref(tab, id, params); }

  const viewEl = document.getElementById('view');
  const liveEl = document.getElementById('live');
  let current = null; // { key, view, timer, busy }

  function setLive(state, title) {
    liveEl.className = 'live ' + state;
    liveEl.title = title;
  }

  async function tick() {
    const c = current;
    if (!c || c.busy || document.hidden) return;
    c.busy = true;
    try {
      await c.view.refresh();
      setLive('ok', 'live: updated ' + new Date().toLocaleTimeString());
    } catch (e) {
      setLive('err', 'update failed: ' + e.message);
      if (!c.errored) showError(e);
      c.errored = true;
    } finally {
      c.busy = false;
    }
  }
  function refreshNow() { if (current) { current.errored = false; tick(); } }

  function route() {
    const r = parseRoute();
    const key = r.tab + '/' + (r.id || '');
    document.querySelectorAll('#tabs a').forEach(a => a.classList.toggle('active', a.dataset.tab === r.tab));
    if (current && current.key === key && current.view.update) {
      current.view.update(r.params); // same view, new filter: keep the page
      refreshNow();
      return;
    }
    if (current) clearInterval(current.timer);
    const make = VIEWS[r.tab] || VIEWS.queues;
    const view = make(r);
    add(clear(viewEl), view.el);
    const period = r.tab === 'workflows' && r.id ? POLL.workflow : (POLL[r.tab] || 3000);
    current = { key, view, busy: false, errored: false };
    current.timer = setInterval(tick, period);
    document.title = 'pg_wf · ' + r.tab;
    tick();
  }
  window.addEventListener('hashchange', route);
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) setLive('idle', 'paused while the page is hidden'); else refreshNow();
  });

  // Whether a poll's answer needs drawing: not while the reader selects text
  // in the page, and not when nothing changed (but at least every 15 s, for
  // the relative times).
  function shouldRender(state, data) {
    const sel = window.getSelection();
    if (sel && !sel.isCollapsed && viewEl.contains(sel.anchorNode)) return false;
    const key = JSON.stringify(data, (k, v) => (k === 'now' ? undefined : v));
    const now = Date.now();
    if (key === state.key && now - state.at < 15000) return false;
    Object.assign(state, { key, at: now });
    return true;
  }

  // ---------------------------------------------------------------- charts

  // Bars of one value per minute over the last hour (60 buckets).
  function sparkline(buckets, idx, nowMinute, cls, label) {
    const W = 150, H = 30, n = 60, bw = W / n;
    const values = new Array(n).fill(0);
    for (const b of buckets || []) {
      const i = n - 1 - Math.round((nowMinute - b[0]) / 60);
      if (i >= 0 && i < n) values[i] += b[idx];
    }
    const max = Math.max(0, ...values);
    const total = values.reduce((a, b) => a + b, 0);
    const svg = s('svg', { class: 'spark ' + cls, width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'data-total': total, 'data-max': max, 'aria-label': label });
    add(svg, s('title', { text: `${label}: ${total} in the last hour, at most ${max} in a minute` }));
    add(svg, s('line', { x1: 0, y1: H - 0.5, x2: W, y2: H - 0.5, class: 'axis' }));
    values.forEach((v, i) => {
      if (!v) return;
      const bh = Math.max(2, (v / max) * (H - 3));
      add(svg, s('rect', { x: (i * bw + 0.3).toFixed(2), y: (H - 1 - bh).toFixed(2), width: (bw - 0.6).toFixed(2), height: bh.toFixed(2), class: 'bar', 'data-minute': i, 'data-value': v }));
    });
    return h('div', { class: 'sparkbox' }, svg, h('div', { class: 'sparklabel' }, h('b', { text: fmtNum(total) }), total ? ` · max ${max}/min` : ''));
  }

  // A bar of the counts per status (of a queue or a workflow).
  function statusBar(counts, width) {
    const total = STATUSES.reduce((a, st) => a + Number(counts[st] || 0), 0);
    const bar = h('div', { class: 'stackbar', title: STATUSES.filter(st => counts[st]).map(st => `${st}: ${counts[st]}`).join(', ') || 'no jobs' });
    if (width) bar.style.width = width;
    if (!total) bar.classList.add('empty');
    for (const st of STATUSES) {
      const n = Number(counts[st] || 0);
      if (!n) continue;
      const seg = h('span', { class: 'seg st-' + st, 'data-status': st });
      seg.style.flexGrow = String(n);
      add(bar, seg);
    }
    return bar;
  }

  // ---------------------------------------------------------------- queues view

  function queuesView() {
    const el = h('section', { class: 'view queues' });
    const summary = h('div', { class: 'summary' });
    const table = h('table', { class: 'grid', id: 'queues-table' });
    add(el, h('h1', {}, 'Queues'), summary, table,
      h('p', { class: 'footnote' }, 'Charts: jobs that finished in each of the last 60 minutes (wf.jobs.finished_at). ',
        '“Since start”: counters of wf.metrics since the server started.'));
    const view = { el };
    const rs = {};
    view.refresh = async () => {
      const d = await api('/api/queues');
      if (shouldRender(rs, d)) render(d);
    };
    function render(d) {
      const totals = {};
      for (const st of STATUSES) totals[st] = d.queues.reduce((a, q) => a + Number(q[st] || 0), 0);
      let doneHour = 0, failedHour = 0;
      for (const list of Object.values(d.series)) for (const b of list) { doneHour += b[1]; failedHour += b[2]; }
      add(clear(summary), 
        stat('queues', d.queues.length),
        stat('ready or later', totals.pending, 'pending'),
        stat('running', totals.running, 'running'),
        stat('waiting', totals.waiting, 'waiting'),
        stat('failed (dead letter)', totals.failed, 'failed'),
        stat('done in the last hour', doneHour, 'done'),
        stat('failed in the last hour', failedHour, 'failed'));
      clear(table);
      add(table, h('thead', {}, h('tr', {},
        h('th', { text: 'Queue' }), h('th', { text: 'Jobs by status' }), h('th', { text: 'Done / min, last hour' }),
        h('th', { text: 'Failed / min, last hour' }), h('th', { text: 'Oldest ready' }), h('th', { text: 'Since start' }),
        h('th', { text: 'Settings' }), h('th', { text: '' }))));
      const tb = h('tbody');
      if (!d.queues.length) add(tb, h('tr', {}, h('td', { colspan: 8, class: 'muted', text: 'No queue is visible to this role (wf.queue_stats shows the queues it holds a right on).' })));
      for (const q of d.queues) add(tb, queueRow(q, d));
      add(table, tb);
    }
    function stat(label, value, st) {
      return h('div', { class: 'stat' + (st ? ' st-text-' + st : '') }, h('div', { class: 'num', text: fmtNum(value) }), h('div', { class: 'lbl', text: label }));
    }
    function queueRow(q, d) {
      const series = d.series[q.queue] || [];
      const m = d.metrics[q.queue];
      const chips = h('div', { class: 'chips' });
      for (const st of STATUSES) {
        const n = Number(q[st] || 0);
        if (!n) continue;
        add(chips, h('a', { class: 'chip st-' + st, href: routeHref('jobs', null, { queue: q.queue, status: st }), 'data-status': st, 'data-count': n, title: `${n} ${st}: show them` }, h('b', { text: fmtNum(n) }), ' ' + st));
      }
      if (!chips.childNodes.length) add(chips, h('span', { class: 'muted', text: 'no jobs' }));
      const since = m ? h('div', { class: 'since' },
        h('div', {}, h('span', { class: 'k', text: 'enqueued' }), fmtNum(m.enqueued)),
        h('div', {}, h('span', { class: 'k', text: 'completed' }), fmtNum(m.completed)),
        h('div', {}, h('span', { class: 'k', text: 'failed' }), fmtNum(m.failed), ' · ', h('span', { class: 'k', text: 'retried' }), fmtNum(m.retried)),
        h('div', {}, h('span', { class: 'k', text: 'recovered' }), fmtNum(m.recovered)),
        m.claim_waits ? h('div', {}, h('span', { class: 'k', text: 'avg claim wait' }), fmtDur(m.claim_wait_seconds / m.claim_waits)) : null)
        : h('span', { class: 'muted', text: d.has_metrics ? 'nothing yet' : 'needs wf.metrics (1.6)' });
      // Settings: whatever columns wf.queue_stats has besides the counts.
      const settings = h('div', { class: 'settings' });
      const paused = q.paused;
      if (paused === true) add(settings, h('span', { class: 'pill paused', text: 'paused' }));
      else if (paused === false) add(settings, h('span', { class: 'pill running', text: 'active' }));
      // (columns a later pg_wf may add to wf.queue_stats: paused, max_running, rate_limit, …)
      const intervals = new Set(q._intervals || []);
      for (const [k, v] of Object.entries(q)) {
        if (COUNT_COLUMNS.has(k) || k === 'paused' || k === '_intervals' || v === null || v === false || v === '') continue;
        const label = h('span', { class: 'k', text: k.replace(/_/g, ' ') });
        add(settings, h('div', { 'data-setting': k }, v === true ? h('span', { text: k.replace(/_/g, ' ') }) : [label, intervals.has(k) ? fmtDur(v) : String(v)]));
      }
      if (!settings.childNodes.length) {
        add(settings, 'paused' in q ? h('span', { class: 'muted', text: 'defaults' })
          : h('span', { class: 'muted', title: 'this pg_wf\u2019s wf.queue_stats shows no queue settings (paused, max_running, …)', text: 'not shown' }));
      }
      const actions = h('div', { class: 'actions' });
      if (paused !== true) add(actions, h('button', { class: 'btn', 'data-action': 'pause', 'data-queue': q.queue, onclick: ev => act(ev.currentTarget, '/api/queue/pause', { queue: q.queue, paused: true }) }, 'Pause'));
      if (paused !== false) add(actions, h('button', { class: 'btn', 'data-action': 'resume', 'data-queue': q.queue, onclick: ev => act(ev.currentTarget, '/api/queue/pause', { queue: q.queue, paused: false }) }, 'Resume'));
      const age = q.oldest_ready_age_seconds;
      return h('tr', { 'data-queue': q.queue, 'data-paused': paused === undefined ? null : String(paused) },
        h('td', { class: 'qname' }, h('a', { href: routeHref('jobs', null, { queue: q.queue }), text: q.queue })),
        h('td', {}, statusBar(q), chips),
        h('td', {}, sparkline(series, 1, d.minute, 'done', 'done per minute')),
        h('td', {}, sparkline(series, 2, d.minute, 'failed', 'failed per minute')),
        h('td', { class: 'age' + (age > 60 ? ' warn' : ''), 'data-age': age ?? '' , text: age === null || age === undefined ? '—' : fmtDur(age) }),
        h('td', {}, since),
        h('td', {}, settings),
        h('td', {}, actions));
    }
    return view;
  }

  // ---------------------------------------------------------------- jobs view

  function jobsView(r) {
    let params = Object.assign({}, r.params);
    const el = h('section', { class: 'view jobs' });
    const queueSel = h('select', { id: 'f-queue', 'aria-label': 'queue' }, h('option', { value: '', text: 'all queues' }));
    const statusSel = h('select', { id: 'f-status', 'aria-label': 'status' }, h('option', { value: '', text: 'any status' }), STATUSES.map(st => h('option', { value: st, text: st })));
    const textIn = h('input', { id: 'f-q', type: 'search', placeholder: 'text in last error', 'aria-label': 'text in last error', size: 28 });
    const wfChip = h('span', { class: 'wfchip' });
    const form = h('form', { class: 'filters', id: 'job-filters' }, queueSel, statusSel, textIn, wfChip, h('button', { class: 'btn', type: 'submit', text: 'Filter' }));
    const bulk = h('div', { class: 'bulk', id: 'bulk' });
    const table = h('table', { class: 'grid jobs-table', id: 'jobs-table' });
    const pager = h('div', { class: 'pager' });
    const detail = h('aside', { class: 'detail', id: 'job-detail' });
    add(el, h('h1', {}, 'Jobs'), form, bulk, h('div', { class: 'split' }, h('div', { class: 'list' }, table, pager), detail));
    let last = null, confirming = null;

    form.addEventListener('submit', ev => { ev.preventDefault(); applyFilters(); });
    queueSel.addEventListener('change', applyFilters);
    statusSel.addEventListener('change', applyFilters);
    function applyFilters() {
      go('jobs', null, Object.assign({}, params, { queue: queueSel.value, status: statusSel.value, q: textIn.value.trim(), offset: '' }));
    }
    function syncForm() {
      statusSel.value = params.status || '';
      if (document.activeElement !== textIn) textIn.value = params.q || '';
      clear(wfChip);
      if (params.workflow) add(wfChip, h('span', { class: 'chip' }, 'workflow ' + params.workflow.slice(0, 8) + '… ', h('a', { href: routeHref('jobs', null, Object.assign({}, params, { workflow: '' })), title: 'remove this filter', text: '×' })));
    }
    syncForm();

    const view = { el };
    view.update = p => { params = Object.assign({}, p); confirming = null; syncForm(); };
    const rs = {};
    view.refresh = async () => {
      const d = await api('/api/jobs', { queue: params.queue, status: params.status, q: params.q, workflow: params.workflow, offset: params.offset, limit: 50 });
      let one = null, oneError = null;
      if (params.job) {
        const i = params.job.lastIndexOf(':')  /* queue names may hold ':' */;
        try {
          one = await api('/api/job', { queue: params.job.slice(0, i), id: params.job.slice(i + 1) });
        } catch (e) {
          oneError = e.message;
        }
      }
      if (!shouldRender(rs, [d, one, oneError, params, confirming])) return;
      last = d;
      renderQueues(d.queues);
      renderBulk(d);
      renderTable(d);
      if (params.job) {
        const top = detail.scrollTop;
        if (one) renderDetail(one.job); else add(clear(detail), h('p', { class: 'error', text: oneError }));
        detail.scrollTop = top;
      } else {
        add(clear(detail), h('p', { class: 'muted', text: 'Select a job to see its payload, result, attempts and timings.' }));
      }
    };
    function renderQueues(queues) {
      const want = params.queue || '';
      const have = Array.from(queueSel.options).map(o => o.value).slice(1);
      const list = queues.includes(want) || !want ? queues : queues.concat([want]);
      if (have.join('\n') !== list.join('\n')) {
        add(clear(queueSel), h('option', { value: '', text: 'all queues' }), list.map(q => h('option', { value: q, text: q })));
      }
      queueSel.value = want;
    }
    function filterText() {
      const parts = [];
      parts.push(params.queue ? `queue ${params.queue}` : 'all queues');
      if (params.status) parts.push(`status ${params.status}`);
      if (params.q) parts.push(`error containing “${params.q}”`);
      if (params.workflow) parts.push(`workflow ${params.workflow.slice(0, 8)}…`);
      return parts.join(', ');
    }
    function renderBulk(d) {
      clear(bulk);
      const n = d.total_capped ? `more than ${fmtNum(d.total - 1)}` : fmtNum(d.total);
      add(bulk, h('span', { class: 'count', id: 'match-count', 'data-total': d.total }, `${n} job${d.total === 1 ? '' : 's'} match (${filterText()})`));
      const canRetry = !params.status || params.status === 'failed' || params.status === 'cancelled';
      const canCancel = !['done', 'cancelled'].includes(params.status || '');
      if (confirming) {
        const what = confirming === 'retry' ? 'Retry the failed and cancelled jobs' : 'Cancel the unfinished and failed jobs';
        add(bulk, h('span', { class: 'confirm' }, `${what} among these ${n}${d.total_capped ? ' (10,000 at most per click)' : ''}? `,
          h('button', { class: 'btn danger', id: 'bulk-confirm', 'data-action': 'bulk-confirm', onclick: async ev => {
            const action = confirming; confirming = null;
            await act(ev.currentTarget, '/api/jobs/bulk', { action, queue: params.queue || null, status: params.status || null, q: params.q || null, workflow: params.workflow || null });
          } }, confirming === 'retry' ? 'Yes, retry them' : 'Yes, cancel them'),
          h('button', { class: 'btn', onclick: () => { confirming = null; renderBulk(last); } }, 'No')));
        return;
      }
      if (!d.total) return;
      if (canRetry) add(bulk, h('button', { class: 'btn', id: 'bulk-retry', 'data-action': 'bulk-retry', onclick: () => { confirming = 'retry'; renderBulk(last); } }, 'Retry all matching'));
      if (canCancel) add(bulk, h('button', { class: 'btn', id: 'bulk-cancel', 'data-action': 'bulk-cancel', onclick: () => { confirming = 'cancel'; renderBulk(last); } }, 'Cancel all matching'));
    }
    function renderTable(d) {
      clear(table);
      add(table, h('thead', {}, h('tr', {}, ['Job', 'Queue', 'Status', 'Step', 'Attempts', 'Last error', 'Created', 'Finished', ''].map(t => h('th', { text: t })))));
      const tb = h('tbody');
      if (!d.jobs.length) add(tb, h('tr', {}, h('td', { colspan: 9, class: 'muted', text: 'No job matches.' })));
      for (const j of d.jobs) {
        const key = j.queue + ':' + j.id;
        const tr = h('tr', { class: 'job' + (params.job === key ? ' selected' : ''), 'data-job': key, 'data-status': j.status },
          h('td', {}, h('a', { href: routeHref('jobs', null, Object.assign({}, params, { job: key })), text: '#' + j.id })),
          h('td', { text: j.queue }),
          h('td', {}, badge(j.status), j.cancel_requested && j.status === 'running' ? h('span', { class: 'muted small', text: ' cancelling' }) : null),
          h('td', {}, j.step_name ? (j.workflow_id ? h('a', { href: routeHref('workflows', j.workflow_id), text: j.step_name, title: 'open its workflow' }) : j.step_name) : h('span', { class: 'muted', text: '—' })),
          h('td', { class: 'num', text: `${j.attempt}/${j.max_attempts}` }),
          h('td', { class: 'err', title: j.last_error || '' , text: trunc(j.last_error || '', 90) }),
          h('td', {}, timeCell(j.created_at)),
          h('td', {}, timeCell(j.finished_at)),
          h('td', { class: 'rowactions' }, jobButtons(j, true)));
        tr.addEventListener('click', ev => {
          if (ev.target.closest('a,button')) return;
          go('jobs', null, Object.assign({}, params, { job: key }));
        });
        add(tb, tr);
      }
      add(table, tb);
      clear(pager);
      const off = Number(params.offset || 0);
      if (off > 0) add(pager, h('a', { class: 'btn', href: routeHref('jobs', null, Object.assign({}, params, { offset: Math.max(0, off - d.limit) || '' })), text: '← newer' }));
      if (d.jobs.length) add(pager, h('span', { class: 'muted', text: ` ${off + 1}–${off + d.jobs.length} ` }));
      if (off + d.jobs.length < d.total) add(pager, h('a', { class: 'btn', href: routeHref('jobs', null, Object.assign({}, params, { offset: off + d.limit })), text: 'older →' }));
    }
    function jobButtons(j, small) {
      const out = [];
      const cls = 'btn' + (small ? ' small' : '');
      if (j.status === 'failed' || j.status === 'cancelled') out.push(h('button', { class: cls, 'data-action': 'retry', 'data-job': j.queue + ':' + j.id, onclick: ev => act(ev.currentTarget, '/api/job/retry', { queue: j.queue, id: j.id }) }, 'Retry'));
      if (!['done', 'cancelled'].includes(j.status) && !j.cancel_requested) out.push(h('button', { class: cls + ' danger', 'data-action': 'cancel', 'data-job': j.queue + ':' + j.id, onclick: ev => act(ev.currentTarget, '/api/job/cancel', { queue: j.queue, id: j.id }) }, 'Cancel'));
      return out;
    }
    function renderDetail(j) {
      clear(detail);
      const queued = secondsBetween(j.created_at, j.started_at);
      const ran = secondsBetween(j.started_at, j.finished_at || (j.status === 'running' ? new Date(serverNow()).toISOString() : null));
      const kv = (k, v) => (v === null || v === undefined || v === '') ? null : h('div', { class: 'kv' }, h('span', { class: 'k', text: k }), h('span', { class: 'v' }, v));
      detail.setAttribute('data-job', j.queue + ':' + j.id);
      detail.setAttribute('data-status', j.status);
      add(detail, 
        h('div', { class: 'dhead' }, h('h2', {}, `Job #${j.id} `, badge(j.status)), h('div', { class: 'actions' }, jobButtons(j, false)),
          h('a', { class: 'close', href: routeHref('jobs', null, Object.assign({}, params, { job: '' })), title: 'close', text: '×' })),
        h('div', { class: 'kvs' },
          kv('queue', j.queue),
          kv('attempts', `${j.attempt} of ${j.max_attempts}`),
          kv('step', j.step_name),
          kv('workflow', j.workflow_id ? h('a', { href: routeHref('workflows', j.workflow_id), text: j.workflow_id }) : null),
          kv('child of job', j.child_of),
          kv('key', j.key), kv('priority', j.priority), kv('version', j.version),
          kv('idempotency key', j.idempotency_key), kv('dedup key', j.dedup_key),
          kv('depends on', j.depends_on && j.depends_on.length ? j.depends_on.join(', ') : null),
          kv('waiting for', j.waiting_for),
          kv('worker', j.worker), kv('owner pid', j.owner_pid),
          kv('cancel requested', j.cancel_requested ? 'yes' : null)),
        h('h3', { text: 'Timings' }),
        h('div', { class: 'kvs' },
          kv('created', h('span', { title: fmtTime(j.created_at), text: fmtAgo(j.created_at) })),
          kv('run at', j.run_at ? h('span', { title: fmtTime(j.run_at), text: fmtAgo(j.run_at) }) : null),
          kv('started', j.started_at ? h('span', { title: fmtTime(j.started_at), text: fmtAgo(j.started_at) }) : null),
          kv('finished', j.finished_at ? h('span', { title: fmtTime(j.finished_at), text: fmtAgo(j.finished_at) }) : null),
          kv('waited to start', queued !== null && queued >= 0 ? fmtDur(queued) : null),
          kv(j.finished_at ? 'ran for' : 'running for', ran !== null && ran >= 0 ? fmtDur(ran) : null),
          kv('lease expires', j.lease_expires_at ? fmtAgo(j.lease_expires_at) : null),
          kv('run deadline', j.run_deadline ? fmtAgo(j.run_deadline) : null),
          kv('start by', j.start_by ? fmtAgo(j.start_by) : null)),
        j.last_error ? [h('h3', { text: 'Last error' }), h('pre', { class: 'errtext', id: 'job-last-error', text: j.last_error })] : null,
        j.progress ? [h('h3', { text: 'Progress' }), h('pre', { text: pretty(j.progress) })] : null,
        h('h3', { text: 'Payload' }), h('pre', { id: 'job-payload', text: pretty(j.payload) }),
        h('h3', { text: 'Result' }), h('pre', { id: 'job-result', text: pretty(j.result) }),
        j.events && Object.keys(j.events).length ? [h('h3', { text: 'Events' }), h('pre', { text: pretty(j.events) })] : null);
    }
    return view;
  }

  // ---------------------------------------------------------------- workflows list

  function workflowsView(r) {
    if (r.id) return workflowDetailView(r);
    let params = Object.assign({}, r.params);
    const el = h('section', { class: 'view workflows' });
    const statusSel = h('select', { id: 'w-status', 'aria-label': 'status' }, h('option', { value: '', text: 'any status' }), ['running', 'done', 'failed', 'cancelled'].map(st => h('option', { value: st, text: st })));
    const textIn = h('input', { id: 'w-q', type: 'search', placeholder: 'name, key or id', size: 24 });
    const kids = h('input', { id: 'w-children', type: 'checkbox' });
    const form = h('form', { class: 'filters' }, statusSel, textIn, h('label', { class: 'check' }, kids, ' include child workflows'), h('button', { class: 'btn', type: 'submit', text: 'Filter' }));
    const table = h('table', { class: 'grid', id: 'workflows-table' });
    add(el, h('h1', {}, 'Workflows'), form, table);
    const apply = () => go('workflows', null, { status: statusSel.value, q: textIn.value.trim(), children: kids.checked ? '1' : '' });
    form.addEventListener('submit', ev => { ev.preventDefault(); apply(); });
    statusSel.addEventListener('change', apply);
    kids.addEventListener('change', apply);
    function sync() { statusSel.value = params.status || ''; if (document.activeElement !== textIn) textIn.value = params.q || ''; kids.checked = !!params.children; }
    sync();
    const view = { el };
    const rs = {};
    view.update = p => { params = Object.assign({}, p); sync(); };
    view.refresh = async () => {
      const d = await api('/api/workflows', params);
      if (!shouldRender(rs, [d, params])) return;
      clear(table);
      add(table, h('thead', {}, h('tr', {}, ['Workflow', 'Status', 'Progress', 'Steps', 'Started', 'Duration', 'Key', 'Parent'].map(t => h('th', { text: t })))));
      const tb = h('tbody');
      if (!d.workflows.length) add(tb, h('tr', {}, h('td', { colspan: 8, class: 'muted', text: 'No workflow matches.' })));
      for (const w of d.workflows) {
        const dur = secondsBetween(w.started_at, w.finished_at || new Date(serverNow()).toISOString());
        const tr = h('tr', { class: 'wf', 'data-workflow-id': w.workflow_id, 'data-status': w.status },
          h('td', {}, h('a', { href: routeHref('workflows', w.workflow_id), text: w.name || w.workflow_id.slice(0, 8) }), h('div', { class: 'muted small mono', text: w.workflow_id })),
          h('td', {}, badge(w.status)),
          h('td', { class: 'progress' }, statusBar(w, '160px')),
          h('td', { class: 'num' }, `${fmtNum(w.done)} / ${fmtNum(w.steps)} done`, w.failed ? h('span', { class: 'st-text-failed', text: ` · ${w.failed} failed` }) : null),
          h('td', {}, timeCell(w.started_at)),
          h('td', { text: fmtDur(dur) }),
          h('td', { text: w.key || '' }),
          h('td', {}, w.child_of ? h('span', { class: 'muted', text: 'job #' + w.child_of }) : ''));
        tr.addEventListener('click', ev => { if (!ev.target.closest('a')) go('workflows', w.workflow_id); });
        add(tb, tr);
      }
      add(table, tb);
    };
    return view;
  }

  // ---------------------------------------------------------------- workflow graph

  const NODE_W = 184, NODE_H = 62, COL_GAP = 70, ROW_GAP = 16, PAD = 14;

  function stepKey(st) { return st.name ?? String(st.id); }

  // Levels by the longest path from a root (a step's column is one more
  // than its latest predecessor's), rows ordered by the barycenter of their
  // neighbours, a few sweeps each way.
  function layoutDag(steps) {
    const byKey = new Map(), byId = new Map();
    steps.forEach((st, i) => { byKey.set(stepKey(st), st); byId.set(String(st.id), st); st._i = i; });
    const preds = new Map(), succs = new Map();
    for (const st of steps) { preds.set(st, []); succs.set(st, []); }
    for (const st of steps) {
      for (const a of st.after || []) {
        const p = byKey.get(a) || byId.get(String(a));
        if (p && p !== st) { preds.get(st).push(p); succs.get(p).push(st); }
      }
    }
    const level = new Map();
    const visiting = new Set();
    function lv(st) {
      if (level.has(st)) return level.get(st);
      if (visiting.has(st)) return 0; // not a DAG: never from pg_wf, but do not loop
      visiting.add(st);
      const l = preds.get(st).length ? 1 + Math.max(...preds.get(st).map(lv)) : 0;
      visiting.delete(st);
      level.set(st, l);
      return l;
    }
    steps.forEach(lv);
    const cols = [];
    for (const st of steps) (cols[level.get(st)] ||= []).push(st);
    const pos = new Map();
    const setPos = () => cols.forEach(c => c.forEach((st, i) => pos.set(st, i)));
    setPos();
    const bary = (st, nb) => { const l = nb.get(st); return l.length ? l.reduce((a, x) => a + pos.get(x), 0) / l.length : pos.get(st); };
    for (let sweep = 0; sweep < 4; sweep++) {
      for (let c = 1; c < cols.length; c++) { cols[c].sort((a, b) => bary(a, preds) - bary(b, preds) || a._i - b._i); setPos(); }
      for (let c = cols.length - 2; c >= 0; c--) { cols[c].sort((a, b) => bary(a, succs) - bary(b, succs) || a._i - b._i); setPos(); }
    }
    // Rows: each step as close as it can be to the mean height of its
    // neighbours (predecessors, or successors for a root), in its column's
    // order, without overlaps: blocks of touching steps are centred on the
    // mean of what their members want (least squares).
    const step = NODE_H + ROW_GAP;
    const y = new Map();
    cols.forEach(c => c.forEach((st, i) => y.set(st, i * step)));
    const mean = l => l.reduce((a, x) => a + y.get(x), 0) / l.length;
    const place = (c, want) => {
      const blocks = [];
      c.forEach((st, i) => {
        blocks.push({ start: i, count: 1, sum: want(st) });
        while (blocks.length > 1) {
          const a = blocks[blocks.length - 2], b = blocks[blocks.length - 1];
          if (a.sum / a.count + a.count * step <= b.sum / b.count) break;
          a.sum += b.sum - b.count * a.count * step;
          a.count += b.count;
          blocks.pop();
        }
      });
      for (const b of blocks) for (let k = 0; k < b.count; k++) y.set(c[b.start + k], b.sum / b.count + k * step);
    };
    const byPreds = st => (preds.get(st).length ? mean(preds.get(st)) : y.get(st));
    const rootsBySuccs = st => (!preds.get(st).length && succs.get(st).length ? mean(succs.get(st)) : y.get(st));
    for (let c = 1; c < cols.length; c++) place(cols[c], byPreds);
    for (let c = cols.length - 2; c >= 0; c--) place(cols[c], rootsBySuccs);
    for (let c = 1; c < cols.length; c++) place(cols[c], byPreds);
    const top = Math.min(...Array.from(y.values()));
    const xy = new Map();
    cols.forEach((c, ci) => c.forEach(st => xy.set(st, { x: PAD + ci * (NODE_W + COL_GAP), y: PAD + y.get(st) - top })));
    const height = PAD * 2 + NODE_H + Math.max(...Array.from(y.values())) - top;
    const width = PAD * 2 + cols.length * NODE_W + Math.max(0, cols.length - 1) * COL_GAP;
    return { preds, succs, xy, width, height };
  }

  // What a step waits for, in words.
  function stepNote(st, preds) {
    switch (st.status) {
      case 'blocked': {
        const open = preds.get(st).filter(p => p.status !== 'done').map(stepKey);
        return open.length ? 'waits for ' + open.join(', ') : 'blocked';
      }
      case 'waiting':
        if (st.waiting_for === 'wf:children') {
          const open = (st.children || []).filter(c => c.status === 'running').length;
          return `waits for ${open || ''} child workflow${open === 1 ? '' : 's'}`.replace('  ', ' ');
        }
        return st.waiting_for ? 'waits for event ' + st.waiting_for : 'waiting';
      case 'pending':
        if (st.run_at && Date.parse(st.run_at) > serverNow() + 1000) return (st.attempt ? 'retry ' : 'runs ') + fmtAgo(st.run_at);
        return 'ready: waits for a worker';
      case 'running': {
        const p = progressText(st.progress);
        return p || ('running ' + fmtDur((serverNow() - Date.parse(st.started_at)) / 1000) + (st.worker ? ' on ' + st.worker : ''));
      }
      case 'failed': return st.last_error ? st.last_error.split('\n')[0] : 'failed';
      case 'cancelled': return st.last_error ? st.last_error.split('\n')[0] : 'cancelled';
      case 'done': return st.finished_at && st.started_at ? 'took ' + fmtDur(secondsBetween(st.started_at, st.finished_at)) : 'done';
      default: return '';
    }
  }
  // A fraction from a progress object: {"done": 3, "of": 10}, {"percent": 30}, …
  function progressFraction(p) {
    if (!p || typeof p !== 'object') return null;
    for (const k of ['percent', 'pct']) if (typeof p[k] === 'number') return Math.max(0, Math.min(1, p[k] / 100));
    if (typeof p.fraction === 'number') return Math.max(0, Math.min(1, p.fraction));
    const total = ['of', 'total', 'count'].map(k => p[k]).find(v => typeof v === 'number' && v > 0);
    if (total) {
      const k = Object.keys(p).find(k => !['of', 'total', 'count'].includes(k) && typeof p[k] === 'number');
      if (k) return Math.max(0, Math.min(1, p[k] / total));
    }
    return null;
  }
  function progressText(p) {
    if (p === null || p === undefined) return '';
    const f = progressFraction(p);
    if (f !== null) return 'progress ' + Math.round(f * 100) + '%';
    return 'progress ' + trunc(JSON.stringify(p), 24);
  }

  function drawDag(wf, opts) {
    const steps = (wf.steps || []).map(x => Object.assign({}, x));
    const wrap = h('div', { class: 'dagwrap' });
    if (!steps.length) { add(wrap, h('p', { class: 'muted', text: 'No steps.' })); return wrap; }
    if (steps.length > 400) { add(wrap, h('p', { class: 'muted', text: `${steps.length} steps: too many to draw; see the table below.` })); return wrap; }
    const L = layoutDag(steps);
    const svg = s('svg', { class: 'dag', width: L.width, height: L.height, viewBox: `0 0 ${L.width} ${L.height}`, 'data-workflow-id': wf.workflow_id, role: 'img', 'aria-label': 'workflow graph of ' + (wf.name || wf.workflow_id) });
    const mid = 'arrow-' + wf.workflow_id.slice(0, 8);
    add(svg, s('defs', {}, ['done', 'open', 'bad'].map(k => s('marker', { id: mid + '-' + k, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead ' + k }))),
      s('clipPath', { id: mid + '-clip' }, s('rect', { x: 0, y: 0, width: NODE_W - 12, height: NODE_H }))));
    const edges = s('g', { class: 'edges' });
    const nodes = s('g', { class: 'nodes' });
    for (const st of steps) {
      const b = L.xy.get(st);
      for (const p of L.preds.get(st)) {
        const a = L.xy.get(p);
        const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x - 2, y2 = b.y + NODE_H / 2;
        const dx = Math.max(24, (x2 - x1) / 2);
        const kind = p.status === 'done' ? 'done' : (p.status === 'failed' || p.status === 'cancelled') ? 'bad' : 'open';
        add(edges, s('path', { class: 'edge ' + kind, d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`, 'marker-end': `url(#${mid}-${kind})`, 'data-from': stepKey(p), 'data-to': stepKey(st) }));
      }
      const note = stepNote(st, L.preds);
      const g = s('g', { class: 'node st-' + st.status + (opts.selected === st.id ? ' selected' : ''), transform: `translate(${b.x},${b.y})`, 'data-step': stepKey(st), 'data-status': st.status, 'data-job-id': st.id, 'data-queue': st.queue, tabindex: 0 });
      add(g, s('title', { text: `${stepKey(st)} (job #${st.id}, queue ${st.queue})\nstatus: ${st.status}, attempt ${st.attempt}/${st.max_attempts}\n${note}` + (st.last_error ? '\nlast error: ' + st.last_error : '') }));
      add(g, s('rect', { class: 'box', width: NODE_W, height: NODE_H, rx: 8, ry: 8 }));
      add(g, s('rect', { class: 'strip', width: 6, height: NODE_H, rx: 3, ry: 3 }));
      const inner = s('g', { transform: 'translate(12,0)', 'clip-path': `url(#${mid}-clip)` });
      add(inner, s('text', { class: 'name', x: 0, y: 18, text: trunc(stepKey(st), 22) }));
      add(inner, s('text', { class: 'status', x: 0, y: 34, text: st.attempt ? `${st.status} · attempt ${st.attempt}/${st.max_attempts}` : `${st.status} · not started` }));
      add(inner, s('text', { class: 'note', x: 0, y: 50, 'data-note': '1', text: trunc(note, 27) }));
      add(g, inner);
      const frac = st.status === 'running' ? progressFraction(st.progress) : null;
      if (frac !== null) {
        add(g, s('rect', { class: 'pbar-bg', x: 12, y: NODE_H - 7, width: NODE_W - 24, height: 3, rx: 1.5 }));
        add(g, s('rect', { class: 'pbar', x: 12, y: NODE_H - 7, width: ((NODE_W - 24) * frac).toFixed(1), height: 3, rx: 1.5 }));
      }
      // Child workflows: one dot each, coloured by its status; a click goes to it.
      const kids = st.children || [];
      if (kids.length) {
        const cg = s('g', { class: 'kids', transform: `translate(${NODE_W - 10},11)` });
        kids.slice(0, 8).forEach((c, i) => {
          const dot = s('circle', { class: 'kid st-' + c.status, cx: -(Math.min(kids.length, 8) - 1 - i) * 11, cy: 0, r: 4.5, 'data-child-workflow': c.workflow_id, 'data-child-name': c.name, 'data-status': c.status });
          add(dot, s('title', { text: `child workflow “${c.name}”: ${c.status}` }));
          dot.addEventListener('click', ev => { ev.stopPropagation(); opts.onChild && opts.onChild(c.workflow_id); });
          add(cg, dot);
        });
        if (kids.length > 8) add(cg, s('text', { class: 'more', x: -8 * 11 - 6, y: 3.5, 'text-anchor': 'end', text: '+' + (kids.length - 8) }));
        add(g, cg);
      }
      g.addEventListener('click', () => opts.onStep && opts.onStep(st));
      g.addEventListener('keydown', ev => { if (ev.key === 'Enter') opts.onStep && opts.onStep(st); });
      add(nodes, g);
    }
    add(svg, edges, nodes);
    add(wrap, svg);
    return wrap;
  }

  function legend() {
    return h('div', { class: 'legend' }, STATUSES.map(st => h('span', { class: 'lg' }, h('i', { class: 'sw st-' + st }), st)),
      h('span', { class: 'lg' }, h('i', { class: 'ln done' }), 'predecessor done'), h('span', { class: 'lg' }, h('i', { class: 'ln open' }), 'not yet'),
      h('span', { class: 'lg' }, h('i', { class: 'dot' }), 'child workflow'));
  }

  function stepTable(wf, preds, onStep, selected) {
    const t = h('table', { class: 'grid steps' });
    add(t, h('thead', {}, h('tr', {}, ['Step', 'Job', 'Queue', 'Status', 'Attempts', 'After', 'What it waits for / outcome', 'Started', 'Finished', 'Children'].map(x => h('th', { text: x })))));
    const tb = h('tbody');
    const L = layoutDag((wf.steps || []).map(x => Object.assign({}, x)));
    for (const st0 of wf.steps || []) {
      const st = Array.from(L.xy.keys()).find(x => x.id === st0.id) || st0;
      const tr = h('tr', { class: selected === st.id ? 'selected' : '', 'data-step': stepKey(st), 'data-status': st.status },
        h('td', { class: 'strong', text: stepKey(st) }),
        h('td', {}, h('a', { href: routeHref('jobs', null, { queue: st.queue, job: st.queue + ':' + st.id }), text: '#' + st.id })),
        h('td', { text: st.queue }),
        h('td', {}, badge(st.status)),
        h('td', { class: 'num', text: `${st.attempt}/${st.max_attempts}` }),
        h('td', { text: (st.after || []).join(', ') }),
        h('td', { class: 'note' + (st.status === 'failed' || st.status === 'cancelled' ? ' err' : ''), title: st.last_error || '', text: trunc(stepNote(st, L.preds), 80) }),
        h('td', {}, timeCell(st.started_at)),
        h('td', {}, timeCell(st.finished_at)),
        h('td', {}, (st.children || []).map(c => h('a', { class: 'chip st-' + c.status, href: routeHref('workflows', c.workflow_id), title: `child workflow ${c.name}: ${c.status}` }, c.name))));
      tr.addEventListener('click', ev => { if (!ev.target.closest('a')) onStep(st); });
      add(tb, tr);
    }
    add(t, tb);
    return t;
  }

  function workflowDetailView(r) {
    const id = r.id;
    const el = h('section', { class: 'view workflow', 'data-workflow-id': id });
    const head = h('div', { class: 'wfhead' });
    const graph = h('div', { class: 'graphbox', id: 'graph' });
    const stepBox = h('div', { class: 'stepbox', id: 'step-detail' });
    const table = h('div', { id: 'steps' });
    const kidsBox = h('div', { class: 'children', id: 'child-workflows' });
    add(el, h('div', { class: 'crumbs' }, h('a', { href: '#/workflows', text: '← workflows' })), head, legend(), graph, stepBox, kidsBox, h('h2', { text: 'Steps' }), table);
    let selected = r.params.step ? Number(r.params.step) : null;
    let lastData = null;
    const rs = {};
    const onStep = st => { selected = st.id; render(lastData); };
    const onChild = cid => {
      const target = document.querySelector(`.childwf[data-workflow-id="${cid}"]`);
      if (target) { target.scrollIntoView({ behavior: 'smooth', block: 'start' }); target.classList.add('flash'); setTimeout(() => target.classList.remove('flash'), 1200); }
      else go('workflows', cid);
    };
    const view = { el };
    view.refresh = async () => {
      const d = await api('/api/workflow', { id });
      if (!shouldRender(rs, d)) return;
      lastData = d;
      render(d);
    };
    function render(d) {
      const wf = d.workflow;
      const c = wf.counts || {};
      add(clear(head), 
        h('h1', {}, wf.name || 'workflow', ' ', badge(wf.status)),
        h('div', { class: 'meta' },
          h('span', { class: 'mono', text: wf.workflow_id }),
          wf.key ? h('span', {}, 'key ', h('b', { text: wf.key })) : null,
          h('span', {}, 'started ', timeCell(wf.started_at)),
          wf.finished_at ? h('span', {}, 'finished ', timeCell(wf.finished_at)) : null,
          d.parent ? h('span', {}, 'child of step ', h('a', { href: routeHref('workflows', d.parent.workflow_id), text: `${d.parent.step_name || '#' + d.parent.id}` }), ` (job #${d.parent.id})`) :
            (wf.child_of ? h('span', {}, `child of job #${wf.child_of}`) : null)),
        h('div', { class: 'countsline' }, statusBar(c, '320px'), h('span', { class: 'muted', text: ` ${fmtNum(c.done)} of ${fmtNum(c.steps)} steps done` + (c.failed ? `, ${c.failed} failed` : '') + (c.running ? `, ${c.running} running` : '') + (c.waiting ? `, ${c.waiting} waiting` : '') }),
          wf.status === 'running' ? h('button', { class: 'btn danger', 'data-action': 'cancel-workflow', onclick: ev => act(ev.currentTarget, '/api/workflow/cancel', { workflow_id: wf.workflow_id }) }, 'Cancel workflow') : null));
      const scroll = graph.firstChild ? [graph.firstChild.scrollLeft, graph.firstChild.scrollTop] : null;
      add(clear(graph), drawDag(wf, { selected, onStep, onChild }));
      if (scroll && graph.firstChild) { graph.firstChild.scrollLeft = scroll[0]; graph.firstChild.scrollTop = scroll[1]; }
      renderStep(wf);
      add(clear(table), stepTable(wf, null, onStep, selected));
      renderChildren(wf, d.children);
    }
    function renderStep(wf) {
      clear(stepBox);
      const st = (wf.steps || []).find(x => x.id === selected);
      if (!st) { add(stepBox, h('p', { class: 'muted small', text: 'Click a step to see its details; a dot on a step is a child workflow (click it to go there).' })); return; }
      add(stepBox, h('div', { class: 'dhead' }, h('h3', {}, `Step ${stepKey(st)} `, badge(st.status), h('a', { class: 'small', href: routeHref('jobs', null, { queue: st.queue, job: st.queue + ':' + st.id }), text: ` job #${st.id} in ${st.queue} →` })),
        h('button', { class: 'close', title: 'close', 'aria-label': 'close', onclick: () => { selected = null; render(lastData); } }, '×')),
        h('div', { class: 'cols' },
          st.last_error ? h('div', {}, h('h4', { text: 'Last error' }), h('pre', { class: 'errtext', text: st.last_error })) : null,
          st.progress ? h('div', {}, h('h4', { text: 'Progress' }), h('pre', { text: pretty(st.progress) })) : null,
          h('div', {}, h('h4', { text: 'Result' }), h('pre', { text: pretty(st.result) })),
          st.events && Object.keys(st.events).length ? h('div', {}, h('h4', { text: 'Events' }), h('pre', { text: pretty(st.events) })) : null));
    }
    function renderChildren(wf, all) {
      clear(kidsBox);
      const seen = new Set();
      function section(parentWf, depth) {
        const out = [];
        for (const st of parentWf.steps || []) {
          for (const c of st.children || []) {
            if (seen.has(c.workflow_id)) continue;
            seen.add(c.workflow_id);
            const cw = all[c.workflow_id];
            const box = h('div', { class: 'childwf', 'data-workflow-id': c.workflow_id, 'data-status': c.status, 'data-child-name': c.name });
            add(box, h('div', { class: 'childhead' }, h('span', { class: 'arrow', text: '↳' }), h('b', { text: c.name }), ' child of step ', h('i', { text: stepKey(st) }), ' ', badge(cw ? cw.status : c.status),
              cw ? h('span', { class: 'muted small', text: ` ${cw.counts.done}/${cw.counts.steps} steps done` }) : null,
              h('a', { class: 'small open', href: routeHref('workflows', c.workflow_id), text: 'open →' })));
            if (cw) {
              add(box, drawDag(cw, { onStep: s2 => go('jobs', null, { queue: s2.queue, job: s2.queue + ':' + s2.id }), onChild }));
              if (depth < 3) add(box, section(cw, depth + 1)); // null: no grandchildren
            }
            out.push(box);
          }
        }
        return out.length ? h('div', { class: 'nest' }, out) : null;
      }
      const inner = section(wf, 1);
      if (inner) add(kidsBox, h('h2', { text: 'Child workflows' }), inner);
    }
    return view;
  }

  // ---------------------------------------------------------------- schedules

  function schedulesView() {
    const el = h('section', { class: 'view schedules' });
    const rs = {};
    const table = h('table', { class: 'grid', id: 'schedules-table' });
    add(el, h('h1', {}, 'Schedules'), table, h('p', { class: 'footnote', text: 'Times are UTC; a schedule enqueues one job per tick into its queue. A disabled schedule skips its ticks; enabled again, it runs from its next tick (no catching up).' }));
    const view = { el };
    view.refresh = async () => {
      const d = await api('/api/schedules');
      if (!shouldRender(rs, d)) return;
      clear(table);
      add(table, h('thead', {}, h('tr', {}, ['Schedule', 'Cron', 'Queue', 'Next run', 'Last run', 'Last job', 'Payload', 'State', ''].map(t => h('th', { text: t })))));
      const tb = h('tbody');
      if (!d.schedules.length) add(tb, h('tr', {}, h('td', { colspan: 9, class: 'muted', text: 'No schedule is visible to this role.' })));
      for (const sc of d.schedules) {
        const en = sc.enabled;
        const btn = en === undefined || !d.can_enable ? h('span', { class: 'muted small', text: 'needs wf_enable_schedule (1.6)' }) :
          h('button', { class: 'btn' + (en ? '' : ' primary'), 'data-action': en ? 'disable' : 'enable', 'data-schedule': sc.name, onclick: ev => act(ev.currentTarget, '/api/schedule/enable', { name: sc.name, enabled: !en }) }, en ? 'Disable' : 'Enable');
        add(tb, h('tr', { 'data-schedule': sc.name, 'data-enabled': en === undefined ? null : String(en) },
          h('td', { class: 'strong', text: sc.name }),
          h('td', { class: 'mono', text: sc.cron }),
          h('td', {}, h('a', { href: routeHref('jobs', null, { queue: sc.queue }), text: sc.queue })),
          h('td', {}, en === false ? h('span', { class: 'muted', title: fmtTime(sc.next_run), text: 'off' }) : timeCell(sc.next_run), sc.next_run && en !== false ? h('div', { class: 'muted small', text: fmtTime(sc.next_run) }) : null),
          h('td', {}, timeCell(sc.last_run)),
          h('td', {}, sc.last_job_id ? h('a', { href: routeHref('jobs', null, { queue: sc.queue, job: sc.queue + ':' + sc.last_job_id }), text: '#' + sc.last_job_id }) : h('span', { class: 'muted', text: '—' })),
          h('td', { class: 'mono small', title: JSON.stringify(sc.payload), text: trunc(JSON.stringify(sc.payload), 40) }),
          h('td', {}, en === undefined ? '—' : h('span', { class: 'pill ' + (en ? 'running' : 'paused'), text: en ? 'enabled' : 'disabled' })),
          h('td', {}, btn)));
      }
      add(table, tb);
    };
    return view;
  }

  const VIEWS = { queues: queuesView, jobs: jobsView, workflows: workflowsView, schedules: schedulesView };

  // ---------------------------------------------------------------- start

  api('/api/info').then(i => {
    const who = document.getElementById('who');
    add(clear(who), h('span', { title: `PostgreSQL ${i.server_version}, pg_wf ${i.version} in schema ${i.schema}` },
      h('b', { text: i.role }), i.superuser ? ' (superuser)' : '', ' @ ', i.database, ' · pg_wf ', i.version));
  }).catch(showError);
  route();
})();
