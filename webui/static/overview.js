// edgelb's page: the virtual services overview (loaded before app.js; plain
// JavaScript, no build step). A gateway may carry thousands of services, so
// the page draws one compact row per VIP, port and protocol — filtered,
// sorted and paged — and a VIP's backend table and charts only on demand.
// The header counts what it names.
'use strict';

const view = {
  filter: '',          // lower-case substring of VIP, service or backend
  sort: 'vip', dir: 1, // column and direction (1 ascending, -1 descending)
  page: 0, size: 25,
  open: new Set(),     // keys ("frontend/proto") whose detail is shown
};

const collator = new Intl.Collator(undefined, { numeric: true });
const fmtInt = (n) => Number(n).toLocaleString('en-US');

// healthIndex maps a backend to its checks; rebuilt when the health list is
// replaced (a poll), so a render with thousands of backends stays linear.
let healthIdx = { list: null, byBackend: new Map() };
function healthOf(service, backend) {
  if (healthIdx.list !== state.health) {
    const m = new Map();
    for (const h of state.health) {
      if (!m.has(h.backend)) m.set(h.backend, []);
      m.get(h.backend).push(h);
    }
    healthIdx = { list: state.health, byBackend: m };
  }
  // The check of the backend's own service, else any check of that address
  // and port (Kubernetes names services its own way), a failing one first.
  let found = null;
  for (const h of healthIdx.byBackend.get(backend) || []) {
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

const backendUp = (r) => r.state === 'active' && !((h) => h && !h.healthy)(healthOf(r.service, r.backend));

// vipTables joins the configured services (names, weights) with the
// server's aggregates (counters): one entry per frontend and protocol.
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
  return [...tables.values()];
}

// summaryRows: one row per table with what the overview sorts and filters on.
function summaryRows() {
  return vipTables().map((t) => {
    const conf = [...t.rows.values()].filter((r) => r.state !== 'unknown');
    const up = conf.filter(backendUp).length;
    const c = charts.lines.get(t.key);
    const last = c && c.vip.points.length ? c.vip.points[c.vip.points.length - 1] : null;
    return Object.assign(t, {
      service: t.names.join(', '),
      up, total: conf.length,
      conns: t.stats ? t.stats.current : 0,
      bytes: last ? last[2] / charts.step : 0,
      search: (t.frontend + ' ' + t.proto + ' ' + t.names.join(' ') + ' ' + [...t.rows.keys()].join(' ')).toLowerCase(),
    });
  });
}

const SORTS = {
  vip: (a, b) => collator.compare(a.frontend, b.frontend) || a.proto.localeCompare(b.proto),
  service: (a, b) => collator.compare(a.service, b.service),
  backends: (a, b) => (a.up - b.up) || (a.total - b.total),
  conns: (a, b) => a.conns - b.conns,
  bytes: (a, b) => a.bytes - b.bytes,
};

function renderVIPs() {
  const all = summaryRows();
  const rows = view.filter ? all.filter((r) => r.search.includes(view.filter)) : all;
  const cmp = SORTS[view.sort];
  // Ties fall back to the VIP, so the order is stable between renders.
  rows.sort((a, b) => view.dir * cmp(a, b) || SORTS.vip(a, b));
  const pages = Math.max(1, Math.ceil(rows.length / view.size));
  view.page = Math.min(view.page, pages - 1);
  const first = view.page * view.size;
  const shown = rows.slice(first, first + view.size);

  const out = [];
  const keep = new Map();
  for (const r of shown) {
    const open = view.open.has(r.key);
    const row = summaryRow(r, open);
    keep.set(r.key, row);
    out.push(row.tr);
    if (open) {
      row.detail.firstChild.replaceChildren(...vipDetail(r));
      out.push(row.detail);
    }
  }
  rowCache = keep;
  if (out.length === 0) {
    out.push(el('tr', {}, el('td', { colspan: 5, class: 'empty' },
      all.length ? 'No virtual service matches the filter.' : 'No virtual services yet.')));
  }
  place($('#vip-summary tbody'), out);
  // The moment the overview first has rows, for the Performance API (the
  // browser test reads it beside first-contentful-paint).
  if (shown.length && performance.getEntriesByName('edgelb-summary-rows').length === 0) performance.mark('edgelb-summary-rows');
  for (const th of document.querySelectorAll('#vip-summary th[data-sort]')) {
    th.setAttribute('aria-sort', th.dataset.sort === view.sort ? (view.dir > 0 ? 'ascending' : 'descending') : 'none');
  }
  $('#vip-count').textContent = view.filter ? `(${fmtInt(rows.length)} of ${fmtInt(all.length)} match)` : `(${fmtInt(all.length)})`;
  $('#vip-page').textContent = rows.length
    ? `rows ${fmtInt(first + 1)}–${fmtInt(first + shown.length)} of ${fmtInt(rows.length)}, page ${view.page + 1} of ${pages}` : '';
  $('#vip-prev').disabled = view.page === 0;
  $('#vip-next').disabled = view.page >= pages - 1;
}

// rowCache keeps each shown row's elements between renders: a redraw (every
// 200 ms while traffic flows) updates their text in place and never removes
// a row that stays, so a click — press and release on the same element —
// is not lost to a redraw in between, and focus stays where it was.
let rowCache = new Map();

function summaryRow(r, open) {
  let row = rowCache.get(r.key);
  if (!row) {
    const detailID = 'detail-' + r.key.replace(/[^a-zA-Z0-9]/g, '_');
    const button = el('button', { type: 'button', class: 'disclose' }, r.frontend + ' ' + r.proto);
    const cells = [el('td'), el('td', { class: 'num' }), el('td', { class: 'num' }), el('td', { class: 'num' })];
    row = { button, cells,
      tr: el('tr', { 'data-key': r.key, 'data-frontend': r.frontend, 'data-protocol': r.proto },
        el('th', { scope: 'row' }, button), ...cells),
      detail: el('tr', { class: 'detail', id: detailID }, el('td', { colspan: 5 })) };
  }
  row.tr.classList.toggle('open', open);
  setText(row.button, 'aria-expanded', String(open));
  if (open) setText(row.button, 'aria-controls', row.detail.id); else row.button.removeAttribute('aria-controls');
  const texts = [r.service || 'not configured here', r.up + '/' + r.total, fmtInt(r.conns), fmtBytes(Math.round(r.bytes)) + '/s'];
  texts.forEach((t, i) => { if (row.cells[i].textContent !== t) row.cells[i].textContent = t; });
  row.cells[1].classList.toggle('state-down', r.up < r.total);
  return row;
}

function setText(e, attr, v) { if (e.getAttribute(attr) !== v) e.setAttribute(attr, v); }

// place makes body's children exactly rows, moving only what is out of place.
function place(body, rows) {
  rows.forEach((r, i) => { if (body.children[i] !== r) body.insertBefore(r, body.children[i] || null); });
  while (body.children.length > rows.length) body.lastElementChild.remove();
}

// vipDetail is one VIP's backend table and charts (what the page showed for
// every VIP before the overview).
function vipDetail(t) {
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
  return [el('table', { class: 'vip', id, 'data-frontend': t.frontend, 'data-protocol': t.proto },
    el('caption', {}, t.frontend + ' ' + t.proto, el('span', { class: 'name' }, t.names.join(', ') || 'not configured here')),
    el('thead', {}, el('tr', {},
      el('th', { scope: 'col' }, 'Backend'), el('th', { scope: 'col', class: 'num' }, 'Weight'),
      el('th', { scope: 'col' }, 'State'), el('th', { scope: 'col', class: 'num' }, 'Current conns'),
      el('th', { scope: 'col', class: 'num' }, 'Total conns'), el('th', { scope: 'col', class: 'num' }, 'Bytes in'),
      el('th', { scope: 'col', class: 'num' }, 'Bytes out'))),
    body,
    el('tfoot', {}, el('tr', {}, el('th', { scope: 'row' }, 'Frontend'), el('td'), el('td'),
      num(s.current), num(s.total), num(fmtBytes(s.bytesIn)), num(fmtBytes(s.bytesOut))))),
  chartFigure(t.key, t.frontend)];
}

function toggleVIP(key) {
  if (view.open.has(key)) view.open.delete(key); else view.open.add(key);
  renderVIPs(); // at once: the click shows its answer without waiting for the next render
}

// wireOverview: filter, page size, pager, sortable headers, row clicks.
function wireOverview() {
  $('#vip-filter').addEventListener('input', (ev) => {
    view.filter = ev.target.value.trim().toLowerCase();
    view.page = 0;
    renderVIPs();
    renderServices();
  });
  $('#vip-page-size').addEventListener('change', (ev) => { view.size = Number(ev.target.value); view.page = 0; renderVIPs(); });
  $('#vip-prev').addEventListener('click', () => { view.page = Math.max(0, view.page - 1); renderVIPs(); });
  $('#vip-next').addEventListener('click', () => { view.page++; renderVIPs(); });
  for (const th of document.querySelectorAll('#vip-summary th[data-sort]')) {
    th.querySelector('button').addEventListener('click', () => {
      const col = th.dataset.sort;
      // Names sort A→Z first; numbers biggest first.
      if (view.sort === col) view.dir = -view.dir; else { view.sort = col; view.dir = col === 'vip' || col === 'service' ? 1 : -1; }
      view.page = 0;
      renderVIPs();
    });
  }
  $('#vip-summary tbody').addEventListener('click', (ev) => {
    const tr = ev.target.closest('tr[data-key]');
    if (tr && !ev.target.closest('tr.detail')) toggleVIP(tr.dataset.key);
  });
}

let lastSummary = 0;
// renderSummary: the header's counts, a polite live region updated at most
// every 10 s so screen readers are not flooded.
function renderSummary() {
  if (Date.now() - lastSummary < 10000 && $('#summary').textContent) return;
  lastSummary = Date.now();
  const vips = new Set(), busy = new Set();
  let backends = 0, up = 0;
  for (const svc of state.services) {
    for (const v of svc.assigned || []) vips.add(v);
    for (const b of svc.spec.backends || []) {
      backends++;
      const w = b.weight === undefined ? 1 : b.weight;
      const addr = hostPort(b.address, b.port || samePort(svc.spec.ports));
      const h = healthOf(svc.spec.name, addr);
      if (w > 0 && !(h && !h.healthy)) up++;
    }
  }
  let cur = 0;
  for (const s of state.stats.values()) {
    cur += s.current;
    if (s.current > 0) busy.add(s.frontend.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1'));
  }
  const down = state.health.filter((h) => !h.healthy).length;
  const n = state.services.length;
  $('#summary').textContent = `${fmtInt(n)} service${n === 1 ? '' : 's'} · ${fmtInt(vips.size)} VIP${vips.size === 1 ? '' : 's'} (${fmtInt(busy.size)} with live connections)` +
    ` · ${fmtInt(up)}/${fmtInt(backends)} backends up · ${fmtInt(cur)} live connections · ${state.pools.length} pools` +
    (down ? ` · ${down} backend${down === 1 ? '' : 's'} down` : '');
}

// samePort is the backend port when the service's only port names it.
function samePort(ports) {
  return ports && ports.length === 1 ? (ports[0].targetPort || ports[0].port) : '*';
}

const MAX_SERVICE_ROWS = 200;
let servicesDrawn = { list: null, filter: null };
// renderServices: the configured services matching the filter (at most
// MAX_SERVICE_ROWS rows, in a scrolling region); redrawn only when the list
// or the filter changes.
function renderServices() {
  if (servicesDrawn.list === state.services && servicesDrawn.filter === view.filter) return;
  servicesDrawn = { list: state.services, filter: view.filter };
  const text = (s) => {
    const sp = s.spec;
    // A firewall-mark service has no address of its own: it takes what the
    // operator's rules mark.
    return [sp.name, ((s.assigned || []).join(', ') || (sp.fwmark ? 'fwmark ' + sp.fwmark :
      ('pending' + (s.pending ? ': ' + s.pending : '')))) +
      (s.failed ? ' — refused by the dataplane: ' + s.failed : ''),
    (sp.ports || []).map((p) => p.port + '/' + (p.protocol || 'TCP') +
      (p.targetPort ? '→' + p.targetPort : '') + (p.nodePort ? ' (node ' + p.nodePort + ')' : '')).join(', '),
    (sp.backends || []).map((b) => hostPort(b.address, b.port || samePort(sp.ports)) +
      ' w' + (b.weight === undefined ? 1 : b.weight)).join(', '),
    sp.scheduler || 'wrr', sp.pool || 'auto'];
  };
  let match = 0;
  const rows = [];
  for (const s of state.services) {
    const c = text(s);
    if (view.filter && !c.join(' ').toLowerCase().includes(view.filter)) continue;
    match++;
    if (rows.length >= MAX_SERVICE_ROWS) continue;
    rows.push(el('tr', { 'data-service': s.spec.name },
      el('th', { scope: 'row' }, c[0]),
      el('td', s.failed ? { class: 'failed', title: s.failed } : {}, c[1]),
      el('td', {}, c[2]), el('td', {}, c[3]), el('td', {}, c[4]), el('td', {}, c[5])));
  }
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 6, class: 'empty' }, state.services.length ? 'No service matches the filter.' : 'No services.')));
  $('#service-table tbody').replaceChildren(...rows);
  $('#service-count').textContent = `(${match > rows.length ? 'first ' + rows.length + ' of ' : ''}${fmtInt(match)}` +
    (view.filter ? ` matching, of ${fmtInt(state.services.length)})` : ')');
}
