// The status page's script: it reads the API with the read token the
// person gives, and renders with the DOM (never HTML from data).
'use strict';

const KEY = 'steadydns.token';
// The page refreshes every push period, so a change shows within two, but
// at most four times a second.
let refreshMs = 1000;

let token = sessionStorage.getItem(KEY) || '';
let last = null; // the previous traffic counters, for rates
let histories = {};
let historyAt = 0; // when the histories were read: their buckets are 10 s
let filter = '';

// A token may come in the URL's fragment, which the browser never sends:
// it moves to sessionStorage and leaves the address bar.
{
  const m = location.hash.match(/^#token=([^&]+)$/);
  if (m) {
    token = decodeURIComponent(m[1]);
    sessionStorage.setItem(KEY, token);
    history.replaceState(null, '', location.pathname + location.search);
  }
}

class Unauthorized extends Error {}

async function get(path) {
  const headers = token ? { Authorization: 'Bearer ' + token } : {};
  const r = await fetch(path, { headers, cache: 'no-store', credentials: 'omit' });
  if (r.status === 401) throw new Unauthorized();
  // 404 and 403: this host does not hold that part (an edge's records, an
  // aggregator's shifts).
  if (r.status === 404 || r.status === 403) return null;
  if (!r.ok) throw new Error(path + ': ' + r.status + ' ' + (await r.text()));
  return r.json();
}

function el(tag, attrs, ...kids) {
  const e = tag === 'svg' || tag === 'rect' || tag === 'title'
    ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}

const badge = (ok, yes, no) => el('span', { class: 'badge ' + (ok ? yes : no) }, ok ? yes : no);

function ago(t) {
  const s = (Date.now() - Date.parse(t)) / 1000;
  if (!isFinite(s) || Date.parse(t) <= 0) return '—';
  if (s < 90) return Math.round(s) + ' s ago';
  if (s < 5400) return Math.round(s / 60) + ' min ago';
  return Math.round(s / 3600) + ' h ago';
}

function renderHost(fleet, table) {
  const parts = [fleet.id, (fleet.roles || []).join(', ')];
  if (fleet.region) parts.push('region ' + fleet.region);
  if (fleet.following) parts.push('following ' + fleet.following);
  document.getElementById('host').textContent = parts.join(' · ');
}

function sum(m, keys) { return keys.reduce((a, k) => a + (m[k] || 0), 0); }
const ANSWERED = ['answered', 'nodata', 'servfail'];
const RRL = ['rrl_slipped', 'rrl_dropped'];

function renderTraffic(traffic, table) {
  const now = Date.now();
  const fb = traffic.fallback || {};
  const xdp = traffic.xdp || {};
  const fbAnswered = Object.entries(fb).filter(([k]) => k !== 'dropped' && !RRL.includes(k)).reduce((a, [, n]) => a + n, 0);
  const c = { xdp: sum(xdp, ANSWERED), fallback: fbAnswered, rrl: sum(xdp, RRL) + sum(fb, RRL) };
  const rate = k => last && now > last.t ? ((c[k] - last.c[k]) / ((now - last.t) / 1000)).toFixed(1) + '/s' : '…';
  if (!last || now > last.t) last = { c, t: now };
  const state = table.fail_open_cold_start ? 'cold start' : table.stale ? 'stale' : 'fresh';
  const items = [
    ['XDP answers', rate('xdp'), 'xdp-rate'],
    ['fallback answers', rate('fallback'), 'fallback-rate'],
    ['RRL slipped or dropped', rate('rrl'), 'rrl-rate'],
    ['health table version', String(table.version), 'table-version'],
    ['table age', table.age_seconds.toFixed(1) + ' s (' + state + ')', 'table-age'],
    ['frames in / rejected', table.frames_ingested + ' / ' + table.frames_rejected, 'frames'],
  ];
  document.getElementById('traffic').replaceChildren(...items.map(([k, v, id]) => el('div', { id }, el('dt', {}, k), el('dd', {}, v))));
}

function renderRecords(records) {
  const box = document.getElementById('records');
  if (!records) {
    box.replaceChildren(el('p', { class: 'note' }, 'This host is not an edge: it has no records in a data plane.'));
    return;
  }
  box.replaceChildren(...records.records.map(r => el('div', { class: 'record', 'data-record': r.name + ' ' + r.type },
    el('h3', {}, r.name + ' ' + r.type + ' ', el('span', { class: 'reason' }, r.policy)),
    el('ul', {}, ...r.answers.map(a => el('li', { 'data-answer': a.value, 'data-in': String(a.in) },
      badge(a.in, 'in', 'out'), ' ', el('code', {}, a.value), a.check ? ' (' + a.check + ') ' : ' ',
      el('span', { class: 'reason' }, a.reason)))))));
}

// chart draws an hour of results, a bar per 10 s bucket: its mean
// latency against the hour's highest, red where a result failed.
function chart(h) {
  const W = 360, H = 28, span = 3600e3, end = Date.now();
  const svg = el('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img' });
  if (!h || !h.hour.length) {
    svg.append(el('title', {}, h && !h.probed ? 'not probed on this host' : 'no results yet'));
    return svg;
  }
  const top = Math.max(...h.hour.map(p => p.latency_ms_mean), 0.001);
  svg.append(el('title', {}, `mean latency, highest ${top.toFixed(1)} ms; ${h.hour.reduce((a, p) => a + p.failures, 0)} failures`));
  for (const p of h.hour) {
    const x = Math.min(W - 1, Math.max(0, (Date.parse(p.start) - (end - span)) / span * W));
    const y = Math.max(2, p.latency_ms_mean / top * H);
    svg.append(el('rect', { class: p.failures ? 'fail' : 'ok', x: x.toFixed(1), y: (H - y).toFixed(1), width: 1, height: y.toFixed(1) }));
  }
  return svg;
}

function renderChecks(checks) {
  const rows = (checks.checks || []).map(c => el('tr', { 'data-check': c.id, 'data-state': c.healthy ? 'up' : 'down' },
    el('td', {}, el('code', {}, c.id), el('br'), el('span', { class: 'reason' }, c.type + (c.admin !== 'auto' ? ', admin ' + c.admin : ''))),
    el('td', {}, badge(c.healthy, 'up', 'down'), el('br'), el('span', { class: 'reason' }, c.checkers_healthy + '/' + c.checkers_reporting + ' checkers')),
    el('td', { class: 'reason' }, c.reason),
    el('td', {}, ago(c.since)),
    el('td', {}, chart(histories[c.id])),
    el('td', {}, ...(c.votes || []).map(v => el('span', {
      class: 'vote ' + (v.healthy ? 'up' : 'down') + (v.counted ? '' : ' stale'),
      'data-checker': v.checker, 'data-region': v.region || '', title: 'heard ' + ago(v.last_heard) + (v.counted ? '' : ', not counted'),
    }, (v.region ? v.region + ': ' : '') + v.checker + ' ' + (v.healthy ? 'up' : 'down'))))));
  document.querySelector('#checks tbody').replaceChildren(...rows);
}

function renderEvents(events) {
  const list = (events.events || []).slice(-200).reverse();
  const box = document.getElementById('events');
  if (!list.length) {
    box.replaceChildren(el('li', { class: 'reason' }, 'no events' + (filter ? ' match' : '')));
    return;
  }
  box.replaceChildren(...list.map(e => el('li', { 'data-event-check': e.check || '', 'data-to': e.to },
    el('time', { datetime: e.time, title: e.time }, new Date(e.time).toLocaleString()), ' ',
    el('code', {}, e.check || 'region ' + e.region), ' ', e.from + ' → ', el('span', { class: 'badge ' + (e.to === 'healthy' || e.to === 'serving' ? 'up' : 'down') }, e.to), ' ',
    el('span', { class: 'reason' }, e.reason + (e.detail ? ': ' + e.detail : '') + (e.records && e.records.length ? ' · ' + e.records.join(', ') : '') + (e.host ? ' · ' + e.host : '')))));
}

async function refresh() {
  if (document.hidden) return;
  try {
    const [checks, records, events, traffic] = await Promise.all([
      get('/api/v1/checks'), get('/api/v1/records'), get('/api/v1/events' + filter), get('/api/v1/traffic')]);
    if (Date.now() - historyAt >= 10e3) {
      historyAt = Date.now();
      const hs = await Promise.all(checks.checks.map(c => get('/api/v1/checks/' + encodeURIComponent(c.id) + '/history')));
      histories = Object.fromEntries(checks.checks.map((c, i) => [c.id, hs[i]]));
    }
    document.getElementById('login').hidden = true;
    document.getElementById('main').hidden = false;
    const period = Math.max(250, (checks.fleet.push_period_seconds || 1) * 1000);
    if (period !== refreshMs) {
      refreshMs = period;
      clearInterval(timer);
      timer = setInterval(refresh, refreshMs);
    }
    document.body.dataset.refreshMs = String(refreshMs);
    renderHost(checks.fleet, checks.table);
    renderTraffic(traffic, checks.table);
    renderRecords(records);
    renderChecks(checks);
    renderEvents(events);
    const s = document.getElementById('status');
    s.className = '';
    s.textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (e) {
    const s = document.getElementById('status');
    if (e instanceof Unauthorized) {
      sessionStorage.removeItem(KEY);
      token = '';
      document.getElementById('login').hidden = false;
      document.getElementById('main').hidden = true;
      s.textContent = 'this API needs its read token';
      return;
    }
    s.className = 'error';
    s.textContent = 'not updated: ' + e.message;
  }
}

document.getElementById('login').addEventListener('submit', ev => {
  ev.preventDefault();
  token = document.getElementById('token').value.trim();
  sessionStorage.setItem(KEY, token);
  document.getElementById('token').value = '';
  historyAt = 0;
  refresh();
});

document.getElementById('filters').addEventListener('submit', ev => {
  ev.preventDefault();
  const q = new URLSearchParams();
  for (const [k, v] of new FormData(ev.target)) if (v.trim()) q.append(k, v.trim());
  filter = q.toString() ? '?' + q : '';
  refresh();
});

let timer = setInterval(refresh, refreshMs);
refresh();
