// edgelb's page: the VIP charts (loaded before app.js; plain JavaScript, no build step).
'use strict';


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
