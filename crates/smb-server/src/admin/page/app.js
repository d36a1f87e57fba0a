// Braid's live view: polls /status once a second, keeps the last 120 seconds per share and
// draws them on canvases. No library: the page must work without internet, and the
// Content-Security-Policy allows only this endpoint's own script, style and fetch.
'use strict';

const WINDOW_S = 120;
const POLL_MS = 1000;
const TIMEOUT_MS = 3000;
const MiB = 1048576;
const COLORS = ['#2563eb', '#d97706', '#7c3aed', '#059669', '#dc2626', '#64748b'];

// Per share: samples {t, iops, read, write, credits, limits} of the last WINDOW_S seconds.
const history = new Map();
// Per share: its card and charts.
const cards = new Map();
// The previous poll, for rates the server does not compute (channels, operations, NFS).
let prev = null;
let polls = 0;

// ---- formatting ---------------------------------------------------------------------------

function num(n, digits) {
  return Number(n).toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function rate(n) {
  return num(n, n >= 100 || n === 0 ? 0 : n >= 1 ? 1 : 2);
}

function mib(bytes) {
  const v = bytes / MiB;
  return num(v, v >= 100 || v === 0 ? 0 : 2);
}

function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i === 0 ? String(n) : num(n, 1)) + ' ' + units[i];
}

function seconds(ms) {
  return num(ms / 1000, 2) + ' s';
}

function micros(us) {
  if (us < 1000) return num(us, 0) + ' µs';
  if (us < 1e6) return num(us / 1000, 2) + ' ms';
  return num(us / 1e6, 2) + ' s';
}

function clock(t) {
  return new Date(t * 1000).toTimeString().slice(0, 8);
}

// ---- DOM helpers --------------------------------------------------------------------------

function cell(text, field, value, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (field) td.dataset.field = field;
  if (value !== undefined && value !== null) td.dataset.value = String(value);
  if (cls) td.className = cls;
  return td;
}

function meter(td, value, max) {
  if (!max) return;
  const m = document.createElement('meter');
  m.min = 0;
  m.max = max;
  m.value = Math.min(value, max);
  m.high = max * 0.9;
  m.optimum = 0;
  td.appendChild(m);
}

function fillBody(table, rows, emptyText, columns) {
  const body = table.tBodies[0];
  body.replaceChildren(...rows);
  if (rows.length === 0) {
    const tr = document.createElement('tr');
    const td = cell(emptyText, null, null, 'empty');
    td.colSpan = columns;
    tr.appendChild(td);
    body.appendChild(tr);
  }
}

// ---- the chart ----------------------------------------------------------------------------

// A line chart of the last WINDOW_S seconds. series: [{label, color, dash}]; draw() takes
// samples [{t, values: [one per series, null where absent]}].
class LineChart {
  constructor(canvas, series, format) {
    this.canvas = canvas;
    this.series = series;
    this.format = format;
  }

  draw(samples, now) {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth || c.width;
    const h = c.clientHeight || c.height;
    if (c.width !== Math.round(w * dpr)) c.width = Math.round(w * dpr);
    if (c.height !== Math.round(h * dpr)) c.height = Math.round(h * dpr);
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const box = { left: 56, right: w - 8, top: 22, bottom: h - 18 };
    const top = niceMax(samples, this.series.length);
    const x = (t) => box.left + (box.right - box.left) * (1 - (now - t) / WINDOW_S);
    const y = (v) => box.bottom - (box.bottom - box.top) * (v / top);
    this.grid(ctx, box, top, y);
    const shown = this.series.filter((_, i) => samples.some((s) => s.values[i] !== null));
    this.series.forEach((s, i) => this.line(ctx, samples, i, s, x, y));
    this.legend(ctx, box, shown);
    c.dataset.points = String(samples.length);
    c.dataset.max = String(top);
  }

  grid(ctx, box, top, y) {
    ctx.font = '11px system-ui, sans-serif';
    ctx.lineWidth = 1;
    ctx.setLineDash([]);
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4;
      const yy = Math.round(y(v)) + 0.5;
      ctx.strokeStyle = i === 0 ? '#9aa3b2' : '#e6e9ef';
      ctx.beginPath();
      ctx.moveTo(box.left, yy);
      ctx.lineTo(box.right, yy);
      ctx.stroke();
      ctx.fillStyle = '#5d6678';
      ctx.fillText(this.format(v), box.left - 4, yy);
    }
    ctx.textBaseline = 'top';
    [[WINDOW_S, '-120 s'], [WINDOW_S / 2, '-60 s'], [0, 'now']].forEach(([ago, text]) => {
      const xx = box.left + (box.right - box.left) * (1 - ago / WINDOW_S);
      ctx.textAlign = ago === WINDOW_S ? 'left' : ago === 0 ? 'right' : 'center';
      ctx.fillText(text, xx, box.bottom + 3);
    });
  }

  line(ctx, samples, i, s, x, y) {
    ctx.strokeStyle = s.color;
    ctx.lineWidth = s.dash ? 1.5 : 2;
    ctx.setLineDash(s.dash ? [6, 4] : []);
    ctx.beginPath();
    let drawing = false;
    for (const p of samples) {
      const v = p.values[i];
      if (v === null) {
        drawing = false;
        continue;
      }
      if (drawing) ctx.lineTo(x(p.t), y(v));
      else ctx.moveTo(x(p.t), y(v));
      drawing = true;
    }
    ctx.stroke();
    ctx.setLineDash([]);
  }

  legend(ctx, box, shown) {
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    let xx = box.left;
    for (const s of shown) {
      ctx.strokeStyle = s.color;
      ctx.lineWidth = 2;
      ctx.setLineDash(s.dash ? [6, 4] : []);
      ctx.beginPath();
      ctx.moveTo(xx, 10);
      ctx.lineTo(xx + 16, 10);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = '#1d2330';
      ctx.fillText(s.label, xx + 20, 10);
      xx += 28 + ctx.measureText(s.label).width;
    }
  }
}

// The top of the y axis: above every value shown, rounded to 1, 2 or 5 times a power of 10.
function niceMax(samples, n) {
  let max = 0;
  for (const s of samples) {
    for (let i = 0; i < n; i++) if (s.values[i] !== null && s.values[i] > max) max = s.values[i];
  }
  if (max <= 0) return 1;
  const raw = max * 1.1;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
  return 10 * p;
}

// ---- shares -------------------------------------------------------------------------------

function limitText(l) {
  const parts = [];
  if (l.iops !== null) parts.push(num(l.iops, 0) + ' IOPS');
  if (l.burst_iops !== null) parts.push('burst ' + num(l.burst_iops, 0) + ' IOPS');
  if (l.burst_credits !== null) parts.push(num(l.burst_credits, 0) + ' burst credits');
  if (l.throughput !== null) parts.push(mib(l.throughput) + ' MiB/s');
  if (l.ingress !== null) parts.push('write ' + mib(l.ingress) + ' MiB/s');
  if (l.egress !== null) parts.push('read ' + mib(l.egress) + ' MiB/s');
  if (l.max_file_iops !== null) parts.push('per file ' + num(l.max_file_iops, 0) + ' IOPS');
  if (l.max_file_throughput !== null) parts.push('per file ' + mib(l.max_file_throughput) + ' MiB/s');
  return parts.length ? 'Provisioned: ' + parts.join(', ') : 'Unlimited (measured only)';
}

function bytesLimit(l) {
  const parts = [];
  if (l.throughput !== null) parts.push(mib(l.throughput));
  if (l.egress !== null) parts.push('read ' + mib(l.egress));
  if (l.ingress !== null) parts.push('write ' + mib(l.ingress));
  return parts.length ? parts.join(', ') : 'unlimited';
}

function card(name) {
  let c = cards.get(name);
  if (c) return c;
  const el = document.getElementById('share-card').content.firstElementChild.cloneNode(true);
  el.dataset.share = name;
  el.querySelector('h3').textContent = name;
  const canvas = (k) => el.querySelector('canvas[data-chart="' + k + '"]');
  c = {
    el,
    iops: new LineChart(canvas('iops'), [
      { label: 'used', color: COLORS[0] },
      { label: 'limit', color: COLORS[4], dash: true },
      { label: 'burst limit', color: COLORS[1], dash: true },
    ], (v) => rate(v)),
    mibps: new LineChart(canvas('mibps'), [
      { label: 'read', color: COLORS[0] },
      { label: 'write', color: COLORS[3] },
      { label: 'limit', color: COLORS[4], dash: true },
      { label: 'read limit', color: COLORS[2], dash: true },
      { label: 'write limit', color: COLORS[1], dash: true },
    ], (v) => mib(v * MiB)),
    credits: new LineChart(canvas('credits'), [
      { label: 'left', color: COLORS[2] },
      { label: 'bucket', color: COLORS[4], dash: true },
    ], (v) => rate(v)),
  };
  cards.set(name, c);
  document.getElementById('share-cards').appendChild(el);
  return c;
}

// The size of the share's burst credit bucket (the limiter's own figure when it gives one).
function bucket(s) {
  const max = s.burst_credits_max !== undefined ? s.burst_credits_max : s.limits.burst_credits;
  return max === undefined ? null : max;
}

function shareRow(s, d) {
  const l = s.limits;
  const tr = document.createElement('tr');
  tr.dataset.share = s.share;
  tr.appendChild(cell(s.share, 'share', null, 'text'));
  const iops = cell(rate(s.iops), 'iops', s.iops);
  meter(iops, s.iops, l.burst_iops || l.iops);
  tr.appendChild(iops);
  const iopsLimit = l.iops === null ? 'unlimited' : num(l.iops, 0) + (l.burst_iops !== null ? ' (burst ' + num(l.burst_iops, 0) + ')' : '');
  tr.appendChild(cell(iopsLimit, 'iops_limit', l.iops));
  tr.appendChild(cell(mib(s.read_bytes_per_s), 'read_mibps', s.read_bytes_per_s / MiB));
  tr.appendChild(cell(mib(s.write_bytes_per_s), 'write_mibps', s.write_bytes_per_s / MiB));
  tr.appendChild(cell(bytesLimit(l), 'mibps_limit', l.throughput === null ? null : l.throughput / MiB));
  const credits = s.burst_credits === null ? '-' : num(s.burst_credits, 0);
  const cr = cell(credits, 'burst_credits', s.burst_credits);
  if (s.burst_credits !== null) meter(cr, s.burst_credits, bucket(s));
  tr.appendChild(cr);
  const perS = d ? (s.throttled_requests - d.throttled_requests) / d.dt : 0;
  const throttling = perS > 0 ? 'throttling' : null;
  tr.appendChild(cell(num(s.throttled_requests, 0) + (perS > 0 ? ' (+' + rate(perS) + '/s)' : ''), 'throttled', s.throttled_requests, throttling));
  tr.appendChild(cell(seconds(s.throttled_ms), 'throttled_time', s.throttled_ms / 1000, throttling));
  return tr;
}

function updateShares(st, t, dt) {
  const before = new Map((prev ? prev.st.shares || [] : []).map((s) => [s.share, s]));
  const rows = [];
  const live = new Set();
  for (const s of st.shares || []) {
    live.add(s.share);
    const old = before.get(s.share);
    rows.push(shareRow(s, old && dt > 0 ? Object.assign({ dt }, old) : null));
    const h = history.get(s.share) || [];
    h.push({ t, iops: s.iops, read: s.read_bytes_per_s, write: s.write_bytes_per_s, credits: s.burst_credits, bucket: bucket(s), limits: s.limits });
    while (h.length && h[0].t < t - WINDOW_S) h.shift();
    history.set(s.share, h);
    drawCard(card(s.share), s, h, t);
  }
  for (const [name, c] of cards) {
    if (!live.has(name)) {
      c.el.remove();
      cards.delete(name);
      history.delete(name);
    }
  }
  fillBody(document.getElementById('shares-table'), rows, 'no shares', 9);
}

function drawCard(c, s, h, now) {
  c.el.querySelector('.limits').textContent = limitText(s.limits);
  const mb = (v) => (v === null ? null : v / MiB);
  c.iops.draw(h.map((p) => ({ t: p.t, values: [p.iops, p.limits.iops, p.limits.burst_iops] })), now);
  c.mibps.draw(h.map((p) => ({
    t: p.t,
    values: [mb(p.read), mb(p.write), mb(p.limits.throughput), mb(p.limits.egress), mb(p.limits.ingress)],
  })), now);
  const bursting = h.some((p) => p.credits !== null);
  c.el.querySelector('figure.credits').hidden = !bursting;
  if (bursting) c.credits.draw(h.map((p) => ({ t: p.t, values: [p.credits, p.bucket] })), now);
  const rows = (s.top_clients || []).map((u) => {
    const tr = document.createElement('tr');
    tr.appendChild(cell(u.client, 'client', null, 'text'));
    tr.appendChild(cell(rate(u.iops), 'iops', u.iops));
    tr.appendChild(cell(mib(u.bytes_per_s), 'mibps', u.bytes_per_s / MiB));
    tr.appendChild(cell(seconds(u.throttled_ms), 'throttled_time', u.throttled_ms / 1000));
    return tr;
  });
  fillBody(c.el.querySelector('table.clients'), rows, 'no client in the last second', 4);
}

// ---- sessions, NFS clients, operations, caches ----------------------------------------------

function updateSessions(st, dt) {
  const old = new Map();
  for (const s of prev ? prev.st.sessions : []) for (const ch of s.channels) old.set(ch.id, ch);
  const rows = [];
  for (const s of st.sessions) {
    const chans = s.channels.length ? s.channels : [null];
    chans.forEach((ch, i) => {
      const tr = document.createElement('tr');
      tr.dataset.session = s.id;
      if (i === 0) {
        const fields = [[s.id, 'id'], [s.user, 'user'], [s.dialect, 'dialect'], [s.signing ? 'yes' : 'no', 'signing'],
          [s.encryption ? 'yes' : 'no', 'encryption'], [s.current_channels + ' / ' + s.max_channels, 'channels']];
        for (const [text, field] of fields) {
          const td = cell(text, field, null, 'text');
          td.rowSpan = chans.length;
          tr.appendChild(td);
        }
      }
      const o = ch && old.get(ch.id);
      const r = (k) => (o && dt > 0 ? Math.max(0, ch[k] - o[k]) / dt : 0);
      tr.appendChild(cell(ch ? ch.client : '-', 'client', null, 'text'));
      tr.appendChild(cell(ch ? mib(r('bytes_in')) : '-', 'in_mibps', ch ? r('bytes_in') / MiB : null));
      tr.appendChild(cell(ch ? mib(r('bytes_out')) : '-', 'out_mibps', ch ? r('bytes_out') / MiB : null));
      tr.appendChild(cell(ch ? bytes(ch.bytes_in) : '-', 'bytes_in', ch ? ch.bytes_in : null));
      tr.appendChild(cell(ch ? bytes(ch.bytes_out) : '-', 'bytes_out', ch ? ch.bytes_out : null));
      rows.push(tr);
    });
  }
  fillBody(document.getElementById('sessions-table'), rows, 'no sessions', 11);
}

function updatePeers(st, dt) {
  const old = new Map((prev ? prev.st.peers || [] : []).map((p) => [p.protocol + ' ' + p.client, p]));
  const rows = (st.peers || []).map((p) => {
    const o = old.get(p.protocol + ' ' + p.client);
    const perS = o && dt > 0 ? Math.max(0, p.calls - o.calls) / dt : 0;
    const tr = document.createElement('tr');
    tr.dataset.peer = p.client;
    tr.appendChild(cell(p.protocol, 'protocol', null, 'text'));
    tr.appendChild(cell(p.client, 'client', null, 'text'));
    tr.appendChild(cell(num(p.connections, 0), 'connections', p.connections));
    tr.appendChild(cell(num(p.calls, 0), 'calls', p.calls));
    tr.appendChild(cell(rate(perS), 'calls_per_s', perS));
    tr.appendChild(cell(bytes(p.bytes_in), 'bytes_in', p.bytes_in));
    tr.appendChild(cell(bytes(p.bytes_out), 'bytes_out', p.bytes_out));
    return tr;
  });
  fillBody(document.getElementById('peers-table'), rows, 'no NFS clients', 7);
}

function updateAdmission(st) {
  const rows = (st.admission || []).map((a) => {
    const tr = document.createElement('tr');
    tr.dataset.protocol = a.protocol;
    tr.appendChild(cell(a.protocol, 'protocol', null, 'text'));
    const conns = cell(num(a.connections, 0) + ' / ' + num(a.max_connections, 0), 'connections', a.connections);
    meter(conns, a.connections, a.max_connections);
    tr.appendChild(conns);
    tr.appendChild(cell(num(a.clients, 0) + ' (' + num(a.max_per_client, 0) + ' each)', 'clients', a.clients));
    const waiting = a.max_unauthenticated == null ? '-' : num(a.unauthenticated, 0) + ' / ' + num(a.max_unauthenticated, 0);
    tr.appendChild(cell(waiting, 'unauthenticated', a.unauthenticated));
    const hit = Object.entries(a.limit_hits || {}).filter(([, n]) => n > 0).map(([l, n]) => l + ' ' + num(n, 0));
    tr.appendChild(cell(hit.length ? hit.join(', ') : 'none', 'limit_hits', null, 'text'));
    return tr;
  });
  fillBody(document.getElementById('admission-table'), rows, 'no limits reported', 5);
}

function updateOps(st, dt) {
  const old = new Map((prev ? prev.st.ops || [] : []).map((o) => [o.protocol + ' ' + o.op, o]));
  const rows = (st.ops || []).filter((o) => o.count > 0).map((o) => {
    const b = old.get(o.protocol + ' ' + o.op);
    const perS = b && dt > 0 ? Math.max(0, o.count - b.count) / dt : 0;
    const tr = document.createElement('tr');
    tr.dataset.op = o.protocol + ' ' + o.op;
    tr.appendChild(cell(o.protocol, 'protocol', null, 'text'));
    tr.appendChild(cell(o.op, 'op', null, 'text'));
    tr.appendChild(cell(num(o.count, 0), 'count', o.count));
    tr.appendChild(cell(rate(perS), 'per_s', perS));
    tr.appendChild(cell(num(o.errors, 0), 'errors', o.errors));
    tr.appendChild(cell(micros(o.mean_us), 'mean', o.mean_us));
    tr.appendChild(cell(micros(o.p50_us), 'p50', o.p50_us));
    tr.appendChild(cell(micros(o.p99_us), 'p99', o.p99_us));
    return tr;
  });
  fillBody(document.getElementById('ops-table'), rows, 'no operations yet', 8);
}

function updateCaches(st) {
  const caches = st.caches || [];
  document.getElementById('caches-section').hidden = caches.length === 0;
  const rows = caches.map((c) => {
    const lookups = c.hits + c.misses;
    const tr = document.createElement('tr');
    tr.appendChild(cell(c.share, 'share', null, 'text'));
    tr.appendChild(cell(num(c.hits, 0), 'hits', c.hits));
    tr.appendChild(cell(num(c.misses, 0), 'misses', c.misses));
    tr.appendChild(cell(lookups ? num((100 * c.hits) / lookups, 1) + '%' : '-', 'ratio', null));
    tr.appendChild(cell(num(c.invalidations, 0), 'invalidations', c.invalidations));
    tr.appendChild(cell(num(c.entries, 0), 'entries', c.entries));
    tr.appendChild(cell(bytes(c.bytes), 'bytes', c.bytes));
    return tr;
  });
  fillBody(document.getElementById('caches-table'), rows, '', 7);
}

// ---- polling ------------------------------------------------------------------------------

function update(st) {
  const t = Date.now() / 1000;
  const dt = prev ? t - prev.t : 0;
  updateShares(st, t, dt);
  updateSessions(st, dt);
  updatePeers(st, dt);
  updateAdmission(st);
  updateOps(st, dt);
  updateCaches(st);
  const channels = st.sessions.reduce((n, s) => n + s.current_channels, 0);
  document.getElementById('summary').textContent = st.connections + ' connections, ' + st.sessions.length + ' sessions, ' +
    channels + ' channels, ' + (st.peers || []).length + ' NFS clients, ' + (st.shares || []).length + ' shares; updated ' + clock(t);
  prev = { t, st };
}

// A page opened from beyond the trusted addresses carries the admin token in its URL
// (`/?token=...`); the status requests present it as a bearer token.
function authHeaders() {
  const token = new URLSearchParams(window.location.search).get('token');
  return token ? { Authorization: 'Bearer ' + token } : {};
}

function setState(live, text) {
  const s = document.getElementById('state');
  s.textContent = text;
  s.className = 'state ' + (live ? 'live' : 'down');
}

async function poll() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
  try {
    const r = await fetch('/status', { cache: 'no-store', signal: abort.signal, headers: authHeaders() });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    update(await r.json());
    polls++;
    document.body.dataset.polls = String(polls);
    setState(true, 'live');
  } catch (e) {
    setState(false, 'server unreachable, retrying (' + e.message + ')');
  } finally {
    clearTimeout(timer);
    setTimeout(poll, POLL_MS);
  }
}

poll();
