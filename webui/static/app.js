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

// needToken: a read or write was refused for want of a token (401). Reads
// refused: the page asks for one in a dialog (once; dismissed, the token
// form in the header stays marked), rather than showing empty tables.
let promptDismissed = false;
function needToken(yes) {
  $('#token-form').classList.toggle('needed', yes);
  if (!yes) return;
  const why = token() ? 'this token is refused: enter another' : 'reads need a token here';
  $('#token-state').textContent = why;
  const d = $('#token-dialog');
  if (d.open || promptDismissed) return;
  $('#token-dialog-why').textContent = token()
    ? 'The token kept in this tab was refused (HTTP 401). Enter another read or write token.'
    : "This gateway's API listens beyond loopback, so reads need a read (or write) token.";
  d.showModal();
}

// useToken keeps the token for this tab and reads everything again with it.
function useToken(v) {
  if (v) sessionStorage.setItem(TOKEN_KEY, v); else sessionStorage.removeItem(TOKEN_KEY);
  promptDismissed = false;
  showTokenState();
  lastEventID = '';
  stream($('#conn'));
  pollAudit();
  pollHealth();
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
let healthTimer = null;
async function pollHealth() {
  clearTimeout(healthTimer);
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
  clearTimeout(healthTimer); // one loop, however many polls were started
  healthTimer = setTimeout(pollHealth, HEALTH_POLL_MS);
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
  clearTimeout(auditTimer);
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
  $('#pool-form-box').open = true;
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
    $('#token').value = '';
    useToken(v);
  });
  // The dialog's form closes it (method=dialog); Escape dismisses it.
  $('#token-dialog-form').addEventListener('submit', () => {
    const v = $('#token-dialog-input').value.trim();
    $('#token-dialog-input').value = '';
    useToken(v);
  });
  $('#token-dialog').addEventListener('cancel', () => { promptDismissed = true; });
  wireOverview();
  $('#pool-form').addEventListener('submit', submitPool);
  $('#pool-cancel').addEventListener('click', () => { clearErrors(); resetForm(); });
  showTokenState();
  render();
  connect();
  pollHealth();
  pollFleet();
  pollAudit();
  // Ages move even when nothing else does.
  setInterval(() => { renderFlows(); renderHealth(); renderAnnounce(); }, 1000);
});

