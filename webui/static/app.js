// edgelb's page: plain JavaScript, no build step. It uses only the REST API
// described in /api/v1/openapi.json: the live stream /api/v1/events for what
// it shows, /api/v1/health (polled) for backend health, /api/v1/pools for the
// pool form. Data is always inserted as text (never as HTML).
'use strict';

const TOKEN_KEY = 'edgelb-token';
const MAX_FLOW_ROWS = 200;
const HEALTH_POLL_MS = 2000;

const state = {
  pools: [], services: [], announce: [],
  stats: new Map(),   // "frontend/proto" -> VIPStats
  flows: new Map(),   // id -> Flow
  flowsTotal: 0,
  offset: 0,          // server clock minus ours, for ages
  editing: null,      // pool name being edited
  health: [],         // GET /api/v1/health: backends under active checks
  healthError: '',    // why the last health poll failed
};

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v; else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids) {
    if (k === undefined || k === null) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function fmtBytes(n) {
  if (n < 1024) return n + ' B';
  const u = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = -1;
  do { n /= 1024; i++; } while (n >= 1024 && i < u.length - 1);
  return n.toFixed(n < 10 ? 1 : 0) + ' ' + u[i];
}

function fmtAge(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
  return Math.floor(s / 3600) + 'h' + String(Math.floor(s / 60) % 60).padStart(2, '0') + 'm';
}

function hostPort(addr, port) {
  return (addr.includes(':') ? '[' + addr + ']' : addr) + ':' + port;
}

function num(v) { return el('td', { class: 'num' }, v); }

// ---- live stream ----

// The stream is read with fetch, not EventSource: EventSource cannot send
// an Authorization header, and beyond loopback reads need the token (the
// same one the forms use, kept in this tab's sessionStorage). The reader
// parses Server-Sent Events itself and reconnects with Last-Event-ID.
let lastEventID = '';
let streamAbort = null;
const handlers = {};
function on(kind, f) { handlers[kind] = f; }

function connect() {
  const conn = $('#conn');
  const sync = (d) => { if (d.time) state.offset = Date.parse(d.time) - Date.now(); };
  on('snapshot', (data) => {
    const d = JSON.parse(data);
    sync(d);
    state.pools = d.pools || []; state.services = d.services || []; state.announce = d.announce || [];
    state.stats = new Map((d.stats || []).map((s) => [s.frontend + '/' + s.protocol, s]));
    state.flows = new Map((d.flows || []).map((f) => [f.id, f]));
    state.flowsTotal = d.flowsTotal;
    lastSummary = 0; // fresh data: announce it now
    schedule();
  });
  on('delta', (data) => {
    const d = JSON.parse(data);
    sync(d);
    for (const f of d.new || []) state.flows.set(f.id, f);
    for (const f of d.update || []) state.flows.set(f.id, f);
    for (const id of d.destroy || []) state.flows.delete(id);
    for (const s of d.stats || []) state.stats.set(s.frontend + '/' + s.protocol, s);
    state.flowsTotal = d.flowsTotal;
    // Keep memory bounded however long the tab stays open.
    if (state.flows.size > 4 * MAX_FLOW_ROWS) {
      const keep = [...state.flows.values()].sort(newestFirst).slice(0, 2 * MAX_FLOW_ROWS);
      state.flows = new Map(keep.map((f) => [f.id, f]));
    }
    schedule();
  });
  // Charts (charts.js): the window after each snapshot, then one step at a time.
  on('series', (data) => { chartsSeries(JSON.parse(data)); schedule(); });
  on('sample', (data) => { chartsSample(JSON.parse(data)); schedule(); });
  for (const kind of ['pools', 'services', 'announce']) {
    on(kind, (data) => { state[kind] = JSON.parse(data) || []; schedule(); });
  }
  stream(conn);
}

async function stream(conn) {
  if (streamAbort) streamAbort.abort();
  const ctl = new AbortController();
  streamAbort = ctl;
  const headers = { 'Accept': 'text/event-stream' };
  if (token()) headers['Authorization'] = 'Bearer ' + token();
  if (lastEventID) headers['Last-Event-ID'] = lastEventID;
  let retry = 2000;
  try {
    const resp = await fetch('/api/v1/events', { headers, signal: ctl.signal, credentials: 'same-origin', cache: 'no-store' });
    if (resp.status === 401) {
      conn.textContent = 'a token is needed to read: enter one above';
      conn.className = 'conn down';
      needToken(true);
      streamAbort = null;
      return; // the token form reconnects
    }
    if (!resp.ok || !resp.body) throw new Error('HTTP ' + resp.status);
    needToken(false);
    conn.textContent = 'live'; conn.className = 'conn live';
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let cut;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, '');
        let kind = 'message', data = [], id = null;
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith(':')) continue;
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          const v = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
          if (field === 'event') kind = v;
          else if (field === 'data') data.push(v);
          else if (field === 'id') id = v;
          else if (field === 'retry' && /^\d+$/.test(v)) retry = Number(v);
        }
        if (id !== null) lastEventID = id;
        if (data.length && handlers[kind]) handlers[kind](data.join('\n'));
      }
    }
  } catch (e) {
    if (ctl.signal.aborted) return;
  }
  if (ctl.signal.aborted) return;
  conn.textContent = 'disconnected, retrying…'; conn.className = 'conn down';
  setTimeout(() => { if (streamAbort === ctl) stream(conn); }, retry);
}

function needToken(yes) {
  $('#token-form').classList.toggle('needed', yes);
  if (yes) $('#token-state').textContent = token() ? 'this token is refused: enter another' : 'reads need a token here';
}

const newestFirst = (a, b) => (Date.parse(b.start) - Date.parse(a.start)) || (b.id - a.id);

let pending = false;
function schedule() {
  if (pending) return;
  pending = true;
  setTimeout(() => { pending = false; render(); }, 200);
}

// ---- rendering ----

function render() {
  renderVIPs();
  renderHealth();
  renderFlows();
  renderPools();
  renderServices();
  renderAnnounce();
  renderSummary();
}

let lastSummary = 0;
function renderSummary() {
  // A polite live region, updated at most every 10 s so screen readers are not flooded.
  if (Date.now() - lastSummary < 10000 && $('#summary').textContent) return;
  lastSummary = Date.now();
  let cur = 0;
  for (const s of state.stats.values()) cur += s.current;
  const down = state.health.filter((h) => !h.healthy).length;
  $('#summary').textContent = `${state.stats.size} frontends · ${cur} live connections · ${state.pools.length} pools` +
    (down ? ` · ${down} backend${down === 1 ? '' : 's'} down` : '');
}

// vipTables joins the configured services (names, weights) with the
// server's aggregates (counters): one table per frontend and protocol.
function vipTables() {
  const tables = new Map();
  const get = (frontend, proto) => {
    const k = frontend + '/' + proto;
    if (!tables.has(k)) tables.set(k, { key: k, frontend, proto, names: [], rows: new Map(), stats: state.stats.get(k) });
    return tables.get(k);
  };
  for (const svc of state.services) {
    const sp = svc.spec;
    for (const vip of svc.assigned || []) {
      for (const p of sp.ports || []) {
        const t = get(hostPort(vip, p.port), (p.protocol || 'TCP').toUpperCase());
        t.names.push(sp.name + (sp.scheduler ? ' · ' + sp.scheduler : ''));
        for (const b of sp.backends || []) {
          const addr = hostPort(b.address, b.port || p.targetPort || p.port);
          const w = b.weight === undefined ? 1 : b.weight;
          t.rows.set(addr, { backend: addr, service: sp.name, weight: w, state: w > 0 ? 'active' : 'drain' });
        }
      }
    }
  }
  for (const s of state.stats.values()) {
    const t = get(s.frontend, s.protocol);
    for (const b of s.backends) {
      if (!t.rows.has(b.backend)) {
        // Seen in traffic but not configured (e.g. a removed backend still draining).
        if (b.current === 0) continue;
        t.rows.set(b.backend, { backend: b.backend, service: '', weight: '', state: 'unknown' });
      }
    }
  }
  return [...tables.values()].sort((a, b) => a.key.localeCompare(b.key));
}

function renderVIPs() {
  const box = $('#vip-tables');
  const tables = vipTables();
  if (tables.length === 0) {
    box.replaceChildren(el('p', { class: 'empty' }, 'No virtual services yet.'));
    return;
  }
  const out = [];
  for (const t of tables) {
    const byBackend = new Map(((t.stats && t.stats.backends) || []).map((b) => [b.backend, b]));
    const body = el('tbody');
    for (const r of [...t.rows.values()].sort((a, b) => a.backend.localeCompare(b.backend))) {
      const c = byBackend.get(r.backend) || { current: 0, total: 0, bytesIn: 0, bytesOut: 0 };
      body.append(el('tr', { 'data-backend': r.backend },
        el('th', { scope: 'row' }, r.backend), num(r.weight),
        stateCell(r),
        num(c.current), num(c.total), num(fmtBytes(c.bytesIn)), num(fmtBytes(c.bytesOut))));
    }
    const s = t.stats || { current: 0, total: 0, bytesIn: 0, bytesOut: 0 };
    const id = 'vip-' + t.key.replace(/[^a-zA-Z0-9]/g, '_');
    out.push(el('table', { class: 'vip', id, 'data-frontend': t.frontend, 'data-protocol': t.proto },
      el('caption', {}, t.frontend + ' ' + t.proto, el('span', { class: 'name' }, t.names.join(', ') || 'not configured here')),
      el('thead', {}, el('tr', {},
        el('th', { scope: 'col' }, 'Backend'), el('th', { scope: 'col', class: 'num' }, 'Weight'),
        el('th', { scope: 'col' }, 'State'), el('th', { scope: 'col', class: 'num' }, 'Current conns'),
        el('th', { scope: 'col', class: 'num' }, 'Total conns'), el('th', { scope: 'col', class: 'num' }, 'Bytes in'),
        el('th', { scope: 'col', class: 'num' }, 'Bytes out'))),
      body,
      el('tfoot', {}, el('tr', {}, el('th', { scope: 'row' }, 'Frontend'), el('td'), el('td'),
        num(s.current), num(s.total), num(fmtBytes(s.bytesIn)), num(fmtBytes(s.bytesOut))))));
    out.push(chartFigure(t.key, t.frontend));
  }
  box.replaceChildren(...out);
}

// healthOf finds a backend's check: the one of its own service, else any
// check of that address and port (Kubernetes names services its own way),
// a failing one first.
function healthOf(service, backend) {
  let found = null;
  for (const h of state.health) {
    if (h.backend !== backend) continue;
    if (h.service === service) return h;
    if (!found || (found.healthy && !h.healthy)) found = h;
  }
  return found;
}

// stateCell: configured state, refined by the backend's health check. A
// failing backend says so in words, with its last error as text beside it
// (screen readers read both; colour is never the only cue).
function stateCell(r) {
  const h = r.state === 'unknown' ? null : healthOf(r.service, r.backend);
  if (h && !h.healthy) {
    return el('td', { class: 'state-down' }, el('span', { class: 'state' }, 'down (health check)'),
      el('span', { class: 'why' }, 'last error: ' + (h.lastError || 'none recorded')));
  }
  const st = h && r.state === 'active' ? 'up' : r.state;
  return el('td', { class: 'state-' + st }, el('span', { class: 'state' }, st));
}

function renderHealth() {
  const now = Date.now() + state.offset;
  const rows = state.health.map((h) => {
    const since = Date.parse(h.since);
    return el('tr', { 'data-service': h.service, 'data-backend': h.backend },
      el('td', {}, h.service), el('th', { scope: 'row' }, h.backend),
      el('td', { class: h.healthy ? 'state-up' : 'state-down' }, h.healthy ? 'up' : 'down'),
      el('td', {}, since > 0 ? el('time', { datetime: h.since, title: new Date(since).toLocaleString() },
        fmtAge(now - since) + ' ago') : '—'),
      num(h.checks), num(h.failures), num(h.transitions),
      el('td', {}, h.lastError || ''));
  });
  if (rows.length === 0) {
    rows.push(el('tr', {}, el('td', { colspan: 8, class: 'empty' },
      state.healthError ? 'Health unavailable: ' + state.healthError : 'No backends under active health checks.')));
  }
  $('#health-table tbody').replaceChildren(...rows);
  const down = state.health.filter((h) => !h.healthy).length;
  $('#health-count').textContent = state.health.length ? `(${state.health.length} checked, ${down} down)` : '';
}

// pollHealth keeps state.health fresh; the live stream does not carry it.
async function pollHealth() {
  if (!document.hidden) {
    try {
      const r = await api('GET', '/api/v1/health');
      if (r.ok && Array.isArray(r.data)) {
        const was = state.health.filter((h) => !h.healthy).length;
        const changed = JSON.stringify(r.data) !== JSON.stringify(state.health) || state.healthError;
        state.health = r.data;
        state.healthError = '';
        chartsHealth(r.data);
        if (state.health.filter((h) => !h.healthy).length !== was) lastSummary = 0; // announce it now
        if (changed) schedule();
      } else {
        state.healthError = (r.data && r.data.error) || 'HTTP ' + r.status;
        schedule();
      }
    } catch (e) {
      state.healthError = String(e.message || e);
      schedule();
    }
  }
  setTimeout(pollHealth, HEALTH_POLL_MS);
}

// pollFleet shows the gateways sharing this one's store (state.type etcd):
// each one's applied store revision, so an operator sees one fall behind.
// Not a fleet (404): the section stays hidden and polling stops.
const FLEET_POLL_MS = 5000;
async function pollFleet() {
  if (!document.hidden) {
    try {
      const r = await api('GET', '/api/v1/fleet');
      if (r.status === 404) return;
      if (r.ok && r.data) renderFleet(r.data);
    } catch (e) { /* the stream's status line reports a dead server */ }
  }
  setTimeout(pollFleet, FLEET_POLL_MS);
}

function renderFleet(f) {
  $('#fleet').hidden = false;
  const gws = f.gateways || [];
  const top = Math.max(f.revision || 0, ...gws.map((g) => g.revision || 0));
  const rows = gws.map((g) => {
    const behind = top - (g.revision || 0);
    const me = g.name === f.gateway;
    const age = g.reported ? Math.max(0, Math.round((Date.now() - Date.parse(g.reported)) / 1000)) + ' s ago' : '';
    return el('tr', { 'data-gateway': g.name }, el('th', { scope: 'row' }, g.name + (me ? ' (this gateway)' : '')),
      el('td', {}, String(g.revision || 0)), el('td', {}, age),
      el('td', { class: behind ? 'state-down' : 'state-up' }, behind ? behind + ' revision(s) behind' : 'current'));
  });
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 4, class: 'empty' }, 'No gateway has reported yet.')));
  $('#fleet-table tbody').replaceChildren(...rows);
  $('#fleet-count').textContent = `(${gws.length} gateways; this one at revision ${f.revision || 0})`;
  $('#fleet-stale').textContent = f.stale ? 'Store unavailable, state may be stale: ' + f.stale : '';
}

function renderFlows() {
  const now = Date.now() + state.offset;
  const flows = [...state.flows.values()].sort(newestFirst).slice(0, MAX_FLOW_ROWS);
  const rows = flows.map((f) => el('tr', { 'data-flow': f.id },
    el('td', {}, f.client), el('td', {}, f.frontend), el('td', {}, f.backend), el('td', {}, f.protocol),
    el('td', {}, f.state || '—'), num(fmtAge(now - Date.parse(f.start))),
    num(fmtBytes(f.bytesIn)), num(fmtBytes(f.bytesOut))));
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 8, class: 'empty' }, 'No live connections.')));
  $('#flow-table tbody').replaceChildren(...rows);
  $('#flow-count').textContent = state.flowsTotal > flows.length
    ? `(newest ${flows.length} of ${state.flowsTotal})` : `(${state.flowsTotal})`;
}

function renderPools() {
  const rows = state.pools.map((p) => {
    const s = p.spec;
    const edit = el('button', { type: 'button', 'aria-label': 'Edit pool ' + s.name }, 'Edit');
    edit.addEventListener('click', () => startEdit(s));
    const del = el('button', { type: 'button', 'aria-label': 'Delete pool ' + s.name }, 'Delete');
    del.addEventListener('click', () => deletePool(s.name));
    return el('tr', { 'data-pool': s.name },
      el('th', { scope: 'row' }, s.name), el('td', {}, (s.addresses || []).join(', ')),
      el('td', {}, el('meter', { min: 0, max: Math.max(p.size, 1), value: p.used, 'aria-label': 'usage of ' + s.name }),
        ' ' + p.used + ' / ' + p.size),
      el('td', {}, s.autoAssign ? 'yes' : 'no'), el('td', {}, s.avoidBuggyIPs ? 'yes' : 'no'),
      el('td', {}, allocationText(s.serviceAllocation)),
      el('td', {}, edit, ' ', del));
  });
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 7, class: 'empty' }, 'No pools.')));
  $('#pool-table tbody').replaceChildren(...rows);
}

// allocationText renders a pool's serviceAllocation (MetalLB's): priority,
// namespaces, and namespace/service selectors as label expressions.
function allocationText(a) {
  if (!a) return '—';
  const sel = (s) => {
    const parts = Object.entries(s.matchLabels || {}).map(([k, v]) => k + '=' + v);
    for (const r of s.matchExpressions || []) {
      parts.push(r.operator === 'Exists' ? r.key : r.operator === 'DoesNotExist' ? '!' + r.key
        : r.key + ' ' + (r.operator === 'In' ? 'in' : 'notin') + ' (' + (r.values || []).join(',') + ')');
    }
    return '{' + parts.join(', ') + '}';
  };
  const out = ['priority ' + (a.priority || 'unset')];
  if ((a.namespaces || []).length) out.push('namespaces ' + a.namespaces.join(', '));
  if ((a.namespaceSelectors || []).length) out.push('namespace labels ' + a.namespaceSelectors.map(sel).join(' or '));
  if ((a.serviceSelectors || []).length) out.push('service labels ' + a.serviceSelectors.map(sel).join(' or '));
  return out.join('; ');
}

// samePort is the backend port when the service's only port names it.
function samePort(ports) {
  return ports && ports.length === 1 ? (ports[0].targetPort || ports[0].port) : '*';
}

function renderServices() {
  const rows = state.services.map((s) => {
    const sp = s.spec;
    return el('tr', { 'data-service': sp.name },
      el('th', { scope: 'row' }, sp.name),
      el('td', s.failed ? { class: 'failed', title: s.failed } : {}, ((s.assigned || []).join(', ') || ('pending' + (s.pending ? ': ' + s.pending : ''))) +
        (s.failed ? ' — refused by the dataplane: ' + s.failed : '')),
      el('td', {}, (sp.ports || []).map((p) => p.port + '/' + (p.protocol || 'TCP') +
        (p.targetPort ? '→' + p.targetPort : '') + (p.nodePort ? ' (node ' + p.nodePort + ')' : '')).join(', ')),
      el('td', {}, (sp.backends || []).map((b) => hostPort(b.address, b.port || samePort(sp.ports)) +
        ' w' + (b.weight === undefined ? 1 : b.weight)).join(', ')),
      el('td', {}, sp.scheduler || 'wrr'), el('td', {}, sp.pool || 'auto'));
  });
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 6, class: 'empty' }, 'No services.')));
  $('#service-table tbody').replaceChildren(...rows);
}

function renderAnnounce() {
  const bgp = [], l2 = [];
  for (const a of state.announce) {
    if (a.kind === 'bgp') {
      for (const p of a.peers || []) {
        bgp.push(el('tr', {}, el('th', { scope: 'row' }, p.name), el('td', {}, p.address),
          el('td', { class: 'state-' + p.state }, p.state), el('td', {}, p.detail || '')));
      }
    } else {
      l2.push(el('tr', {}, el('th', { scope: 'row' }, a.kind), el('td', {}, (a.owned || []).join(', ') || 'none'),
        el('td', {}, (a.peers || []).map((p) => p.name + ' ' + p.address + ' (' + p.state + ')').join(', '))));
    }
  }
  if (bgp.length === 0) bgp.push(el('tr', {}, el('td', { colspan: 4, class: 'empty' }, 'No BGP sessions.')));
  if (l2.length === 0) l2.push(el('tr', {}, el('td', { colspan: 3, class: 'empty' }, 'No L2 announcer.')));
  $('#bgp-table tbody').replaceChildren(...bgp);
  $('#l2-table tbody').replaceChildren(...l2);
}

// ---- token and pool form ----

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

function showTokenState() {
  $('#token-state').textContent = token() ? 'token set for this tab' : 'no token';
}

// ---- audit trail ----

const AUDIT_POLL_MS = 10000;
let auditTimer = null;
// pollAudit shows the newest changes (GET /api/v1/audit): who, from where,
// what, and the object before and after.
async function pollAudit() {
  clearTimeout(auditTimer);
  if (!document.hidden) {
    try {
      const r = await api('GET', '/api/v1/audit?limit=50');
      if (r.ok) renderAudit(r.data.entries || [], '');
      else renderAudit([], (r.data && r.data.error) || 'HTTP ' + r.status);
    } catch (e) {
      renderAudit([], String(e));
    }
  }
  auditTimer = setTimeout(pollAudit, AUDIT_POLL_MS);
}

function renderAudit(entries, err) {
  $('#audit-error').textContent = err;
  $('#audit-count').textContent = entries.length ? '(' + entries.length + ' newest)' : '';
  const rows = entries.map((e) => el('tr', {},
    el('td', {}, new Date(e.time).toLocaleString()),
    el('td', {}, e.identity), el('td', {}, e.source), el('td', {}, e.client || ''),
    el('td', {}, e.object), el('td', {}, e.action),
    el('td', { class: 'summary-cell' }, e.before || ''), el('td', { class: 'summary-cell' }, e.after || '')));
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 8, class: 'empty' }, err ? 'Not shown.' : 'No changes recorded yet.')));
  $('#audit-table tbody').replaceChildren(...rows);
}

async function api(method, path, body) {
  const headers = { 'Accept': 'application/json' };
  if (token()) headers['Authorization'] = 'Bearer ' + token();
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin' });
  if (resp.status === 401) needToken(true);
  let data = null;
  if (resp.status !== 204) {
    try { data = await resp.json(); } catch (e) { data = { error: 'HTTP ' + resp.status }; }
  }
  return { ok: resp.ok, status: resp.status, data };
}

function clearErrors() {
  for (const e of document.querySelectorAll('#pool-form .error')) e.textContent = '';
  for (const e of document.querySelectorAll('#pool-form [aria-invalid]')) e.removeAttribute('aria-invalid');
  $('#pool-form-ok').textContent = '';
}

// showError puts the API's message beside the field it names
// ("name", "addresses", "addresses[2]"); anything else goes under the form.
function showError(err, status) {
  const field = (err.field || '').split(/[.[]/)[0];
  const msg = err.error + (err.value && !err.error.includes(err.value) ? ' (' + err.value + ')' : '');
  const span = document.querySelector(`#pool-form .error[data-field="${CSS.escape(field)}"]`);
  if (span) {
    span.textContent = msg;
    const input = $('#pool-form [name="' + field + '"]');
    if (input) { input.setAttribute('aria-invalid', 'true'); input.focus(); }
  } else {
    $('#pool-form-error').textContent = msg + ' [HTTP ' + status + ']';
  }
}

function readForm() {
  const spec = {
    name: $('#pool-name').value.trim(),
    addresses: $('#pool-addresses').value.split(/[\n,]+/).map((s) => s.trim()).filter((s) => s),
    autoAssign: $('#pool-auto').checked,
    avoidBuggyIPs: $('#pool-buggy').checked,
  };
  // The form does not edit these: an edit keeps what the pool has (a PUT
  // replaces the whole pool).
  const old = state.editing && state.pools.find((p) => p.spec.name === state.editing);
  if (old && old.spec.advertisement) spec.advertisement = old.spec.advertisement;
  if (old && old.spec.serviceAllocation) spec.serviceAllocation = old.spec.serviceAllocation;
  return spec;
}

function resetForm() {
  state.editing = null;
  $('#pool-form').reset();
  $('#pool-name').disabled = false;
  $('#pool-form-title').textContent = 'Create a pool';
  $('#pool-submit').textContent = 'Create pool';
  $('#pool-cancel').hidden = true;
}

function startEdit(spec) {
  clearErrors();
  state.editing = spec.name;
  $('#pool-name').value = spec.name;
  $('#pool-name').disabled = true;
  $('#pool-addresses').value = (spec.addresses || []).join('\n');
  $('#pool-auto').checked = !!spec.autoAssign;
  $('#pool-buggy').checked = !!spec.avoidBuggyIPs;
  $('#pool-form-title').textContent = 'Edit pool ' + spec.name;
  $('#pool-submit').textContent = 'Save pool';
  $('#pool-cancel').hidden = false;
  $('#pool-addresses').focus();
}

async function submitPool(ev) {
  ev.preventDefault();
  clearErrors();
  const body = readForm();
  // Advertisement settings are not on this form: keep the pool's own.
  if (state.editing) {
    const cur = state.pools.find((p) => p.spec.name === state.editing);
    if (cur && cur.spec.advertisement) body.advertisement = cur.spec.advertisement;
  }
  const r = state.editing
    ? await api('PUT', '/api/v1/pools/' + encodeURIComponent(state.editing), body)
    : await api('POST', '/api/v1/pools', body);
  if (!r.ok) { showError(r.data || { error: 'HTTP ' + r.status }, r.status); return; }
  const verb = state.editing ? 'saved' : 'created';
  resetForm();
  $('#pool-form-ok').textContent = 'Pool ' + r.data.spec.name + ' ' + verb + '.';
}

async function deletePool(name) {
  clearErrors();
  if (!window.confirm('Delete pool ' + name + '?')) return;
  const r = await api('DELETE', '/api/v1/pools/' + encodeURIComponent(name));
  if (!r.ok) { $('#pool-form-error').textContent = 'Delete ' + name + ': ' + r.data.error + ' [HTTP ' + r.status + ']'; return; }
  $('#pool-form-ok').textContent = 'Pool ' + name + ' deleted.';
}

document.addEventListener('DOMContentLoaded', () => {
  $('#token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = $('#token').value.trim();
    if (v) sessionStorage.setItem(TOKEN_KEY, v); else sessionStorage.removeItem(TOKEN_KEY);
    $('#token').value = '';
    showTokenState();
    lastEventID = '';
    stream($('#conn'));
    pollAudit();
  });
  $('#pool-form').addEventListener('submit', submitPool);
  $('#pool-cancel').addEventListener('click', () => { clearErrors(); resetForm(); });
  showTokenState();
  render();
  connect();
  pollHealth();
  pollFleet();
  pollAudit();
  // Ages move even when nothing else does.
  setInterval(() => { renderFlows(); renderHealth(); }, 1000);
});

// ---- charts ----

// Charts of the last 15 minutes, hand-drawn SVG (no library, no network).
// The stream sends the server's window once after each snapshot ("series")
// and one step every 5 s ("sample"); points are counts per step, drawn as
// rates. Every line carries its raw numbers in data-* attributes so tests
// (and curious operators) can compare them with /api/v1/stats.

const SERIES_LEN = 180;
const SVG_NS = 'http://www.w3.org/2000/svg';
const COLORS = ['#0b57d0', '#b06000', '#137333', '#a142f4', '#c5221f', '#007b83', '#5f6368'];

const charts = {
  step: 5,
  times: [],          // Date ms of step ends, oldest first
  lines: new Map(),   // "frontend/proto" -> { vip: line, backends: Map(backend -> line) }
  marks: new Map(),   // backend -> [{ t, healthy }] health transitions seen
};

function newLine(l) {
  return { baseConns: l ? l.baseConns : 0, baseBytes: l ? l.baseBytes : 0, points: l ? l.points.slice() : [] };
}

// chartsSeries takes the server's whole window (after a snapshot).
function chartsSeries(d) {
  charts.step = d.step || 5;
  charts.times = (d.times || []).map((t) => Date.parse(t));
  charts.lines = new Map();
  for (const v of d.vips || []) {
    charts.lines.set(v.frontend + '/' + v.protocol, {
      vip: newLine(v.line), backends: new Map((v.backends || []).map((b) => [b.backend, newLine(b)])) });
  }
}

// pushPoint appends one step to a line, padding a line that missed steps
// with zeros and dropping what falls out of the window into its base.
function pushPoint(line, p, n) {
  while (line.points.length < n - 1) line.points.unshift([0, 0, 0]);
  line.points.push(p);
  while (line.points.length > SERIES_LEN) {
    const old = line.points.shift();
    line.baseConns += old[0]; line.baseBytes += old[2];
  }
}

// chartsSample appends the newest step; charted lines it does not name had
// nothing in that step.
function chartsSample(d) {
  charts.times.push(Date.parse(d.time));
  if (charts.times.length > SERIES_LEN) charts.times.shift();
  const n = charts.times.length;
  const seen = new Set();
  for (const v of d.vips || []) {
    const k = v.frontend + '/' + v.protocol;
    // A line new in a sample starts from the base the server sent with it.
    if (!charts.lines.has(k)) {
      const base = v.line || {};
      charts.lines.set(k, { vip: { baseConns: base.baseConns || 0, baseBytes: base.baseBytes || 0, points: [] }, backends: new Map() });
    }
    const c = charts.lines.get(k);
    if (v.line && v.line.points && v.line.points.length) {
      pushPoint(c.vip, v.line.points[0], n); seen.add(c.vip);
    }
    for (const b of v.backends || []) {
      if (!c.backends.has(b.backend)) c.backends.set(b.backend, { baseConns: b.baseConns, baseBytes: b.baseBytes, points: [] });
      const l = c.backends.get(b.backend);
      pushPoint(l, b.points[0], n); seen.add(l);
    }
  }
  for (const c of charts.lines.values()) {
    for (const l of [c.vip, ...c.backends.values()]) {
      if (!seen.has(l) && l.points.length) pushPoint(l, [0, 0, 0], n);
    }
  }
}

// chartsHealth records health transitions for the marks: each check's
// `since` (when it entered its current state) and every change seen.
function chartsHealth(list) {
  for (const h of list) {
    const t = Date.parse(h.since);
    const m = charts.marks.get(h.backend) || [];
    if (!m.some((x) => x.t === t && x.healthy === h.healthy)) m.push({ t, healthy: h.healthy });
    while (m.length > 50) m.shift();
    charts.marks.set(h.backend, m);
  }
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function fmtRate(v, bytes) {
  if (bytes) return fmtBytes(Math.round(v)) + '/s';
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2).replace(/\.?0+$/, '') || '0';
}

const METRICS = [
  { idx: 0, title: 'connections/s', rate: true },
  { idx: 1, title: 'active connections', rate: false },
  { idx: 2, title: 'bytes/s', rate: true, bytes: true },
];

// chartFigure draws one VIP's three panels: the VIP (thick) and each
// backend, with health transitions of its backends as vertical marks.
function chartFigure(key, frontend) {
  const c = charts.lines.get(key);
  const fig = el('figure', { class: 'charts', 'data-frontend': frontend });
  fig.append(el('figcaption', {}, 'Up to the last 15 minutes, ' + frontend + ' (' + charts.step + ' s steps; active counts conntrack entries, TIME_WAIT included)'));
  if (!c || charts.times.length === 0) {
    fig.append(el('p', { class: 'empty' }, 'No chart yet: the first step ends ' + charts.step + ' s after the page connects.'));
    return fig;
  }
  const n = charts.times.length;
  // The axis spans the steps held (at most 15 minutes), so a page open for a
  // minute shows that minute, not a sliver at the right edge.
  // A point is drawn at the end of its step; the axis starts where the first step began.
  const t1 = charts.times[n - 1], t0 = charts.times[0] - charts.step * 1000;
  const span = fmtAge(t1 - t0);
  const W = 360, H = 110, L = 46, R = 6, T = 14, B = 16;
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  const series = [['VIP', c.vip], ...[...c.backends.entries()].sort((a, b) => a[0].localeCompare(b[0]))];
  const legend = el('ul', { class: 'legend' });
  series.forEach(([name, l], i) => {
    const sw = el('span', { class: 'swatch', 'data-color': i % COLORS.length });
    legend.append(el('li', {}, sw, name === 'VIP' ? 'frontend (all backends)' : name));
  });
  for (const m of METRICS) {
    const val = (p) => m.rate ? p[m.idx] / charts.step : p[m.idx];
    let max = 0;
    for (const [, l] of series) for (const p of l.points) max = Math.max(max, val(p));
    max = max || 1;
    const y = (v) => T + (H - T - B) * (1 - v / max);
    const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'data-metric': m.title,
      'aria-label': `${m.title} of ${frontend}, last ${span}, peak ${fmtRate(max, m.bytes)}` });
    g.append(svg('text', { x: 2, y: 10, class: 'title' }, m.title),
      svg('text', { x: L - 3, y: T + 4, class: 'axis', 'text-anchor': 'end' }, fmtRate(max, m.bytes)),
      svg('text', { x: L - 3, y: H - B, class: 'axis', 'text-anchor': 'end' }, '0'),
      svg('text', { x: L, y: H - 3, class: 'axis' }, '−' + span),
      svg('text', { x: W - R, y: H - 3, class: 'axis', 'text-anchor': 'end' }, 'now'),
      svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'base' }));
    // Health marks of this VIP's backends.
    for (const [name] of series.slice(1)) {
      for (const mk of charts.marks.get(name) || []) {
        if (mk.t < t0 || mk.t > t1 + charts.step * 1000) continue;
        const xm = x(Math.min(mk.t, t1)).toFixed(1);
        g.append(svg('line', { x1: xm, x2: xm, y1: T, y2: H - B, class: 'mark ' + (mk.healthy ? 'up' : 'down'),
          'data-backend': name, 'data-time': new Date(mk.t).toISOString() },
        svg('title', {}, `${name} ${mk.healthy ? 'up' : 'down'} at ${new Date(mk.t).toLocaleTimeString()}`)));
      }
    }
    series.forEach(([name, l], i) => {
      const off = n - l.points.length;
      const pts = l.points.map((p, j) => x(charts.times[off + j]).toFixed(1) + ',' + y(val(p)).toFixed(1));
      g.append(svg('polyline', { points: pts.join(' '), class: 'line' + (name === 'VIP' ? ' vip' : ''),
        stroke: COLORS[i % COLORS.length], 'data-series': name, 'data-base-conns': l.baseConns,
        'data-base-bytes': l.baseBytes, 'data-values': l.points.map((p) => p[m.idx]).join(',') }));
    });
    fig.append(g);
  }
  fig.append(legend);
  return fig;
}
