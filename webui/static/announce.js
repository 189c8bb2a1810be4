// edgelb's page: the announcements panel (loaded before app.js; plain
// JavaScript, no build step). What the announcers report (the stream's
// `announce`, the same list as GET /api/v1/announce): BGP sessions with
// their BFD session, L2 ownership and members, state-sync peers alive or
// dead with the age of their last packet.
'use strict';

// ago renders a server timestamp as an age on the server's clock.
function ago(ts) {
  const t = Date.parse(ts || '');
  if (!(t > 0)) return '';
  return fmtAge(Date.now() + state.offset - t) + ' ago';
}

function timeCell(ts, none) {
  const a = ago(ts);
  return el('td', {}, a ? el('time', { datetime: ts, title: new Date(Date.parse(ts)).toLocaleString() }, a) : none || '—');
}

// ownedCell lists an announcer's VIPs; past a handful, behind a disclosure
// (a gateway can own a thousand), which stays open across redraws.
function ownedCell(a, wasOpen) {
  const owned = a.owned || [];
  if (owned.length === 0) return el('td', {}, 'none');
  if (owned.length <= 8) return el('td', {}, owned.join(', '));
  return el('td', {}, el('details', { 'data-owner': a.kind, open: wasOpen.has(a.kind) },
    el('summary', {}, fmtInt(owned.length) + ' VIPs'), el('span', { class: 'list' }, owned.join(', '))));
}

function bfdCells(p) {
  const b = p.bfd;
  if (!b) return [el('td', { class: 'hint' }, 'off'), el('td'), el('td'), el('td')];
  const diag = [b.diagnostic, b.remoteDiagnostic && 'peer: ' + b.remoteDiagnostic].filter(Boolean).join('; ');
  return [
    el('td', { class: 'bfd state-' + b.state }, b.state),
    el('td', {}, b.detect + (b.multihop ? ' multihop' : '')),
    num(b.ups + '/' + b.downs),
    el('td', {}, b.lastDown ? ago(b.lastDown) || b.lastDown : 'never', diag ? el('span', { class: 'why' }, diag) : null),
  ];
}

function renderAnnounce() {
  const wasOpen = new Set([...document.querySelectorAll('#l2-table details[open]')].map((d) => d.dataset.owner));
  const bgp = [], l2 = [], sync = [];
  let syncDead = 0, syncPeers = 0, bgpUp = 0;
  for (const a of state.announce) {
    if (a.kind === 'bgp') {
      for (const p of a.peers || []) {
        if (p.state === 'Established') bgpUp++;
        bgp.push(el('tr', { 'data-peer': p.name }, el('th', { scope: 'row' }, p.name), el('td', {}, p.address),
          el('td', { class: 'state-' + p.state }, p.state), timeCell(p.since),
          ...bfdCells(p), el('td', {}, p.detail || '')));
      }
    } else if (a.kind === 'statesync') {
      for (const p of a.peers || []) {
        const peer = p.name === 'sync peer';
        if (peer) { syncPeers++; if (p.state !== 'alive') syncDead++; }
        sync.push(el('tr', { 'data-peer': p.address, class: peer ? 'peer' : 'local' },
          el('th', { scope: 'row' }, p.name), el('td', {}, p.address),
          el('td', { class: 'state-' + p.state }, p.state),
          peer ? timeCell(p.lastPacket, 'none seen') : el('td', {}, ''),
          num(p.queue === undefined ? '' : fmtInt(p.queue)), el('td', { class: 'detail-cell' }, p.detail || '')));
      }
    } else {
      // How many VIPs each member answers for, as this gateway knows it.
      const owns = new Map();
      for (const m of Object.values(a.owners || {})) owns.set(m, (owns.get(m) || 0) + 1);
      l2.push(el('tr', { 'data-announcer': a.kind }, el('th', { scope: 'row' }, a.kind), ownedCell(a, wasOpen),
        el('td', {}, (a.peers || []).map((p) => p.name + ' ' + p.address + ' (' + p.state +
          (p.lastPacket ? ', last heard ' + ago(p.lastPacket) : '') +
          (owns.has(p.name) ? ', owns ' + fmtInt(owns.get(p.name)) + (owns.get(p.name) === 1 ? ' VIP' : ' VIPs') : '') + ')').join(', '))));
    }
  }
  if (bgp.length === 0) bgp.push(el('tr', {}, el('td', { colspan: 9, class: 'empty' }, 'No BGP sessions.')));
  if (l2.length === 0) l2.push(el('tr', {}, el('td', { colspan: 3, class: 'empty' }, 'No L2 announcer.')));
  if (sync.length === 0) sync.push(el('tr', {}, el('td', { colspan: 6, class: 'empty' }, 'No state sync.')));
  $('#bgp-table tbody').replaceChildren(...bgp);
  $('#l2-table tbody').replaceChildren(...l2);
  $('#sync-table tbody').replaceChildren(...sync);
  $('#bgp-count').textContent = bgp[0].dataset.peer ? `(${bgpUp} of ${bgp.length} established)` : '';
  $('#sync-count').textContent = syncPeers ? `(${syncPeers - syncDead} of ${syncPeers} peers alive)` : '';
}
