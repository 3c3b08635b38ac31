// Purgatory's live view. Plain JavaScript, no build step, nothing loaded from elsewhere.
//
// The broker pushes a frame (server-sent events on /api/view/stream) whenever something
// changed: /api/state plus the clock, the requests that arrived or changed, and the
// replication events since the previous frame. Everything is drawn from the latest frame.
//
// The panels are drawn with Preact (preact-10.29.8.mjs beside this file: the library's own
// build, vendored, served by the broker like this file). A panel's draw describes what it
// shows, `h(tag, attrs, ...children)`, and Preact changes in the page only what differs
// from the panel's previous draw: a busy broker changes a few numbers per panel per frame,
// and rebuilding the panels made the browser lay out and repaint all of them 11 times a
// second. Lists are keyed (`key`): an item keeps its node wherever it moves, so the row
// under the eye (or the pointer) does not take its neighbour's text when one arrives.
//
// Every name that comes from a client (topics, client ids, groups, descriptions) is a
// child string or an attribute value, which Preact puts in the page as text, never parsed
// as HTML (nothing here uses dangerouslySetInnerHTML); nodes written directly get
// textContent.
//
// This file stays a classic script and loads Preact as a module: its functions are
// globals, which scripts/bench_view.py's `floor` control replaces.
'use strict';

const PREACT = '/assets/preact-10.29.8.mjs';
let preact = null; // the module, once loaded
let h = null;      // preact.h

const MAX_REQUESTS = 300;
const MAX_EVENTS = 200;
// Rows in the request table: the panel shows about ten; the filters reach the rest of the
// page's last 300. Every row costs layout on each frame of a busy broker.
const SHOWN_REQUESTS = 30;
const SHOWN_PENDING = 12;

let frame = null;          // the latest frame
let frameAt = 0;           // performance.now() when it arrived
let source = null;         // the EventSource
const requests = new Map(); // seq -> request view
let events = [];           // replication events, newest first
let flushes = [];          // bucket flushes seen, newest first
let lastFlushNumber = -1;
let flashes = [];          // {level, slot, kind, until}
let arrows = [];           // {from: level, slot, n, until}
let selected = null;       // {level, slot} of the selected pending operation's bucket

// ------------------------------------------------------------------ small helpers

// Draws `view` (an `h` tree, an array of them, or null) as the content of element `id`.
function show(id, view) {
  preact.render(view, document.getElementById(id));
}

// A countdown to `atMs` on the broker clock, "in 1,234 ms". Drawn without children, so
// Preact leaves its text alone: renderCountdowns writes it, on each frame and between
// frames, in every element of class `countdown`.
function countdown(atMs) {
  return h('span', { class: 'countdown', 'data-at': atMs });
}

const fmt = new Intl.NumberFormat('en-US');
function n(x) { return x === null || x === undefined ? '–' : fmt.format(x); }
// A span of time for labels: `20 ms`, `8 s`, `160 s`.
function dur(ms) {
  if (ms >= 1000 && ms % 1000 === 0) return `${fmt.format(ms / 1000)} s`;
  return `${fmt.format(ms)} ms`;
}

function msText(x) {
  if (x === null) return '–';
  if (x < 0.01) return x.toFixed(3);
  if (x < 10) return x.toFixed(2);
  if (x < 1000) return x.toFixed(1);
  return fmt.format(Math.round(x));
}

// The broker clock now: interpolated between frames while a system clock runs.
function nowMs() {
  if (!frame) return 0;
  const c = frame.clock;
  if (c.mode === 'system' && !c.frozen) return c.now_ms + (performance.now() - frameAt);
  return c.now_ms;
}

function partitionsByName() {
  const m = new Map();
  for (const p of frame.state.partitions) m.set(`${p.topic}-${p.partition}`, p);
  return m;
}

// A pending operation's wheel bucket; none when its timeout is already due.
function bucketText(b) {
  if (!b) return 'due now';
  return `L${b.level}·slot ${b.slot} (flush @${n(b.expiration_ms)})`;
}

// Who sent a request: a follower by its replica id, a client by its client id.
function who(r) {
  return r.replica_id !== null && r.replica_id >= 0 ? `replica ${r.replica_id}` : r.client_id;
}

function setIfChanged(el, name, value) {
  const v = String(value);
  if (el.getAttribute(name) !== v) el.setAttribute(name, v);
}

function textIfChanged(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

// ------------------------------------------------------------------ controls

function token() { return sessionStorage.getItem('purgatory.token') || ''; }

function say(text, bad) {
  const el = document.getElementById('status');
  el.textContent = text;
  el.style.color = bad ? '#fca5a5' : '#fde68a';
}

async function post(path, body) {
  return call('POST', path, body);
}

async function call(method, path, body) {
  const headers = { 'Content-Type': body && body.startsWith('{') ? 'application/json' : 'text/plain' };
  if (token()) headers.Authorization = 'Bearer ' + token();
  let r;
  try {
    r = await fetch(path, { method, headers, body: method === 'GET' ? undefined : (body || '') });
  } catch (e) {
    say(`${path}: ${e}`, true);
    return null;
  }
  let json = null;
  try { json = await r.json(); } catch (e) { /* not JSON */ }
  if (!r.ok) {
    const why = json && json.error ? json.error : `HTTP ${r.status}`;
    if (r.status === 401) {
      document.getElementById('token-box').hidden = false;
      say(`needs the admin token: ${why}`, true);
    } else if (r.status === 403) {
      say(`refused: ${why}`, true);
    } else {
      say(`${path}: ${why}`, true);
    }
    return null;
  }
  return json;
}

function stepBy(ms) {
  post('/api/clock/advance', String(ms)).then((r) => {
    if (r) say(`clock stepped by ${n(ms)} ms to ${n(r.now_ms)} ms: ${n(r.fired)} timer task(s) fired`);
  });
}

// The built-in scenarios that fit this broker: broker steps need a cluster, follower
// steps the simulated followers. Chosen once the first frame says which this is.
let scenarios = null;
function setupScenarios() {
  if (scenarios !== null || !frame) return;
  scenarios = [];
  const cluster = (frame.state.brokers || []).length > 1;
  fetch('/api/scenarios').then((r) => r.json()).then((list) => {
    scenarios = list.filter((s) => s.brokers === cluster);
    const sel = document.getElementById('scenario-select');
    sel.replaceChildren(...scenarios.map((s) => {
      const o = document.createElement('option');
      o.value = s.name;
      o.textContent = s.title;
      o.title = s.description;
      return o;
    }));
  });
}

function setupControls() {
  document.getElementById('scenario-run').onclick = () => {
    const name = document.getElementById('scenario-select').value;
    post(`/api/scenarios/run?name=${encodeURIComponent(name)}`, '').then((r) => {
      if (r) say(`scenario "${r.title}": ${r.steps.length} step(s) over ${n(r.duration_ms ?? r.steps.at(-1)?.at_ms ?? 0)} ms — ${r.steps.map((s) => `@${n(s.at_ms)} ${s.target} ${s.action}`).join(', ')}`);
    });
  };
  document.getElementById('freeze').onclick = () => post('/api/clock/freeze').then((r) => r && say(`clock frozen at ${n(r.now_ms)} ms`));
  document.getElementById('resume').onclick = () => post('/api/clock/resume').then((r) => r && say(`clock running again from ${n(r.now_ms)} ms`));
  document.getElementById('step1').onclick = () => stepBy(1);
  document.getElementById('steptick').onclick = () => stepBy(frame ? frame.clock.tick_ms : 1);
  document.getElementById('stepN').onclick = () => stepBy(Math.max(0, Number(document.getElementById('stepn').value) || 0));
  document.getElementById('send').onsubmit = (e) => {
    e.preventDefault();
    const body = JSON.stringify({
      topic: document.getElementById('send-topic').value,
      acks: Number(document.getElementById('send-acks').value),
      timeout_ms: Number(document.getElementById('send-timeout').value) || 0,
      value: document.getElementById('send-value').value,
    });
    post('/api/send', body).then((r) => {
      if (r) say(`sent produce #${r.correlation_id} as ${r.client_id} to ${r.topic}-${r.partition} (acks=${r.acks === -1 ? 'all' : r.acks})`);
    });
  };
  const tok = document.getElementById('token');
  tok.value = token();
  tok.onchange = () => sessionStorage.setItem('purgatory.token', tok.value);
  for (const id of ['filter-client', 'filter-topic']) document.getElementById(id).oninput = () => requestsPace.drawNow();
  document.getElementById('filter-followers').onchange = connect;
}

function follower(id, action, value) {
  post(`/api/followers/${id}/${action}`, value === undefined ? '' : String(value)).then((r) => {
    if (!r) return;
    const now = r.status ? r.status.state : r.fetchers.map((f) => f.state).join(', ');
    say(`${r.status ? 'follower' : 'broker'} ${id}: ${action}${value === undefined ? '' : ' ' + value} (now ${now})`);
  });
}

// Kill, restart or shut down a broker of a cluster; the status line tells the elections.
function broker(id, action) {
  post(`/api/brokers/${id}/${action}`, '').then((r) => {
    if (!r) return;
    const elected = r.changes.filter((c) => c.type === 'leader_elected' || c.type === 'no_leader');
    const moves = elected.slice(0, 4).map((c) => c.type === 'no_leader'
      ? `${c.tp.topic}-${c.tp.partition} offline`
      : `${c.tp.topic}-${c.tp.partition} → ${c.new_leader} (epoch ${c.leader_epoch}${c.clean ? '' : ', unclean'})`);
    const more = elected.length > 4 ? ` and ${elected.length - 4} more` : '';
    say(`broker ${id}: ${action} · ${elected.length} election(s)${moves.length ? ': ' + moves.join(', ') + more : ''}`);
  });
}

// ------------------------------------------------------------------ the stream

function connect() {
  if (source) source.close();
  const followers = document.getElementById('filter-followers').checked;
  source = new EventSource('/api/view/stream' + (followers ? '?followers=1' : ''));
  const conn = document.getElementById('conn');
  source.onopen = () => { conn.textContent = 'live'; conn.className = 'pill live'; };
  source.onerror = () => { conn.textContent = 'reconnecting…'; conn.className = 'pill down'; };
  source.addEventListener('frame', (e) => onFrame(JSON.parse(e.data)));
}

function onFrame(f) {
  frame = f;
  frameAt = performance.now();
  window.purgatoryFrames = (window.purgatoryFrames || 0) + 1;
  noteArrivals(f);
  for (const r of f.requests) requests.set(r.seq, r);
  if (requests.size > MAX_REQUESTS) {
    const keep = [...requests.keys()].sort((a, b) => b - a).slice(0, MAX_REQUESTS);
    const keepSet = new Set(keep);
    for (const k of [...requests.keys()]) if (!keepSet.has(k)) requests.delete(k);
  }
  if (f.events.length) {
    const fresh = f.events.filter((e) => !events.length || e.seq > events[0].seq);
    events = fresh.concat(events).slice(0, MAX_EVENTS);
    eventsPace.note(fresh.length);
  }
  noteFlushes();
  render();
}

// New bucket flushes, from the wheel's flush log (its last 64, numbered).
function noteFlushes() {
  const now = performance.now();
  const fresh = frame.state.timer.flushes.filter((x) => x.number > lastFlushNumber);
  if (fresh.length) lastFlushNumber = fresh[fresh.length - 1].number;
  flushesPace.note(fresh.length);
  // Flushes from before the page opened go in the log without animation.
  const first = window.purgatoryFrames === 1;
  for (const x of fresh) {
    flushes.unshift({ ...x, fresh: first ? 0 : now });
    if (first) continue;
    if (x.moved_down > 0) {
      flashes.push({ level: x.level, slot: x.slot, kind: 'cascade', until: now + 1500 });
      // One arrow per level: the latest cascade from it.
      arrows = arrows.filter((a) => a.level !== x.level);
      arrows.push({ level: x.level, slot: x.slot, n: x.moved_down, until: now + 1800 });
    } else if (x.fired > 0) {
      flashes.push({ level: x.level, slot: x.slot, kind: 'fire', until: now + 900 });
    }
  }
  flushes = flushes.slice(0, 40);
}

// ------------------------------------------------------------------ rendering

// The page's three logs (recent requests, replication events, bucket flushes) each gain
// dozens of rows a frame on a busy broker, more than anyone can read: a log that turns
// over 11 times a second shows nothing. So a log is redrawn at most every `calmMs` while
// it is calm, and once a second while more than BUSY_PER_S rows a second arrive, and its
// heading says so. Rows that arrive in between show with the next redraw. Everything else
// on the page follows every frame. For the request table, whose rows are the page's
// costliest to lay out, it also saves the browser work (docs/performance.md).
const BUSY_PER_S = 40;
const BUSY_EVERY_MS = 1000;

class Pace {
  constructor(noteId, calmMs, draw) {
    this.noteId = noteId;
    this.calmMs = calmMs;
    this.draw = draw;
    this.arrivals = []; // [performance.now(), rows that arrived then], the last 2 s
    this.drawnAt = -Infinity;
    this.timer = null;
  }

  // Counts `rows` new rows arriving now.
  note(rows) {
    this.arrivals.push([performance.now(), rows]);
  }

  // Rows a second over the last 2 s (a frame carries at most 20 new requests, so a busy
  // broker's request log reads as about 220).
  rate() {
    const since = performance.now() - 2000;
    this.arrivals = this.arrivals.filter(([at]) => at > since);
    return this.arrivals.reduce((sum, [, k]) => sum + k, 0) / 2;
  }

  busy() {
    return this.rate() > BUSY_PER_S;
  }

  // The log changed: redraws it now if it is due, else when it will be.
  schedule() {
    const wait = (this.busy() ? BUSY_EVERY_MS : this.calmMs) - (performance.now() - this.drawnAt);
    if (wait <= 0) this.drawNow();
    else if (!this.timer) this.timer = setTimeout(() => this.drawNow(), wait);
  }

  drawNow() {
    this.drawnAt = performance.now();
    if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    this.showPace();
    this.draw();
  }

  // The heading's note; also called between frames, so that it clears when traffic stops.
  showPace() {
    textIfChanged(document.getElementById(this.noteId),
      this.busy() ? `(busy: over ${BUSY_PER_S} a second, redrawn once a second)` : '');
  }
}

// The request table follows a calm broker 4 times a second: its rows are the costliest.
const requestsPace = new Pace('requests-pace', 250, () => renderRequests());
const eventsPace = new Pace('events-pace', 0, () => renderEvents());
const flushesPace = new Pace('flushes-pace', 0, () => renderFlushes());

// What each section was last drawn from: a section whose inputs are unchanged is not drawn
// again (a busy broker sends 11 frames a second, and most of a frame repeats the last;
// comparing the inputs costs less than having Preact compare the panels).
const drawn = {};

// Calls `draw` unless `key` is what the section was last drawn from.
function redraw(section, key, draw) {
  if (drawn[section] === key) return;
  drawn[section] = key;
  draw();
}

function render() {
  const st = frame.state;
  setupScenarios();
  renderClock();
  // The wheel moves with time only through frames; flashes and arrows fade between them.
  const timer = { ...st.timer, now_ms: 0 };
  const marks = [flashes.map((f) => [f.level, f.slot, f.kind]), arrows.map((a) => [a.level, a.slot, a.n])];
  redraw('wheel', JSON.stringify([timer, marks, selected, st.purgatories.produce.pending_buckets]), renderWheel);
  // Countdowns are moved on by renderCountdowns, not by redrawing.
  redraw('purgatories', JSON.stringify([st.purgatories, st.partitions.map((p) => p.high_watermark), selected]), renderPurgatories);
  redraw('groups', JSON.stringify(st.groups), renderGroups);
  redraw('faults', JSON.stringify(st.faults), renderFaults);
  redraw('partitions', JSON.stringify([st.partitions, st.transactions]), renderPartitions);
  redraw('brokers', JSON.stringify(st.brokers), renderBrokers);
  redraw('followers', JSON.stringify(st.followers), renderFollowers);
  // The logs: redrawn when they gained rows, at their pace (the first frame draws them).
  const newestEvent = events.length ? events[0].seq : null;
  if (newestEvent !== drawn.events) { drawn.events = newestEvent; eventsPace.schedule(); }
  const newestFlush = flushes.length ? flushes[0] : null;
  if (newestFlush !== drawn.flushes) { drawn.flushes = newestFlush; flushesPace.schedule(); }
  requestsPace.schedule();
  renderCountdowns();
}

function renderClock() {
  const c = frame.clock;
  const el = document.getElementById('clock');
  let mode;
  if (c.frozen) mode = 'FROZEN';
  else if (c.mode === 'manual') mode = 'manual clock';
  else mode = 'system clock';
  textIfChanged(el, `${mode} · ${n(Math.floor(nowMs()))} ms`);
  // Setting an attribute to the value it has still restyles the element: only changes go in.
  setIfChanged(el, 'class', 'clock' + (c.frozen || c.mode === 'manual' ? ' frozen' : ''));
  const enable = (id, on) => { const b = document.getElementById(id); if (b.disabled === Boolean(on)) b.disabled = !on; };
  enable('freeze', c.can_freeze && !c.frozen);
  enable('resume', c.frozen);
  for (const id of ['step1', 'steptick', 'stepN']) enable(id, c.steppable);
  textIfChanged(document.getElementById('steptick'), `+1 tick (${c.tick_ms} ms)`);
  if (frame.token_required) document.getElementById('token-box').hidden = false;
}

function arcPath(cx, cy, r0, r1, a0, a1) {
  const p = (r, a) => `${(cx + r * Math.cos(a)).toFixed(2)} ${(cy + r * Math.sin(a)).toFixed(2)}`;
  return `M ${p(r1, a0)} A ${r1} ${r1} 0 0 1 ${p(r1, a1)} L ${p(r0, a1)} A ${r0} ${r0} 0 0 0 ${p(r0, a0)} Z`;
}

// The wheel's geometry: ring radii, width per level, title space.
const WHEEL = { R: 64, r0: 40, W: 2 * 64 + 34, top: 30, H: 2 * 64 + 30 + 34 };
let wheelShape = null; // {key, rings: [{cx, cy, segs: [{d, x, y}]}]}

// Where the rings and their segments go, computed again only when the wheel's levels
// change (overflow levels appear on demand), not on every frame.
function wheelGeometry(levels) {
  const key = JSON.stringify(levels.map((l) => [l.level, l.tick_ms, l.wheel_size]));
  if (wheelShape && wheelShape.key === key) return wheelShape;
  const { R, r0, W, top } = WHEEL;
  const rings = levels.map((l, i) => {
    const cx = i * W + W / 2, cy = top + R;
    const size = l.wheel_size;
    const segs = [];
    for (let slot = 0; slot < size; slot++) {
      const a0 = -Math.PI / 2 + (slot * 2 * Math.PI) / size;
      const a1 = a0 + (2 * Math.PI) / size;
      const am = (a0 + a1) / 2, rm = (R + r0) / 2;
      segs.push({ d: arcPath(cx, cy, r0, R, a0, a1), x: (cx + rm * Math.cos(am)).toFixed(2), y: (cy + rm * Math.sin(am) + 3).toFixed(2) });
    }
    return { cx, cy, segs };
  });
  wheelShape = { key, rings };
  return wheelShape;
}

function renderWheel() {
  const timer = frame.state.timer;
  const { levels, buckets } = timer;
  const now = performance.now();
  flashes = flashes.filter((f) => f.until > now);
  arrows = arrows.filter((a) => a.until > now);
  textIfChanged(document.getElementById('wheel-summary'),
    `${n(timer.pending)} timer(s) pending · wheel time ${n(timer.current_time_ms)} ms · ${levels.length} level(s)`);
  // The buckets holding a parked produce's timeout are outlined (a frame lists the first
  // few pending operations and the buckets of all of them).
  const produceBuckets = new Set(frame.state.purgatories.produce.pending_buckets.map((b) => `${b.level}/${b.slot}`));
  const geometry = wheelGeometry(levels);
  const byBucket = new Map(buckets.map((b) => [`${b.level}/${b.slot}`, b]));
  const flashAt = new Map(flashes.map((f) => [`${f.level}/${f.slot}`, f.kind]));
  const { R, r0, W, top, H } = WHEEL;
  const rings = levels.map((l, i) => {
    const { cx, cy, segs } = geometry.rings[i];
    const size = l.wheel_size;
    const cursor = Math.floor(l.current_time_ms / l.tick_ms) % size;
    const paths = [], counts = [];
    for (let slot = 0; slot < size; slot++) {
      const key = `${l.level}/${slot}`;
      const b = byBucket.get(key);
      let cls = 'seg';
      if (b) cls += b.entries > 5 ? ' full many' : ' full';
      if (slot === cursor) cls += ' cursor';
      const fl = flashAt.get(key);
      if (fl) cls += fl === 'fire' ? ' flash-fire' : ' flash-cascade';
      if (selected && selected.level === l.level && selected.slot === slot) cls += ' selected';
      else if (produceBuckets.has(key)) cls += ' holds-produce';
      paths.push(h('path', { d: segs[slot].d, class: cls, 'data-level': l.level, 'data-slot': slot, 'data-entries': b ? b.entries : 0 },
        h('title', null, b
          ? `level ${l.level} slot ${slot}: ${b.entries} timer(s), flushed at ${n(b.expiration_ms)} ms`
          : `level ${l.level} slot ${slot}: empty`)));
      counts.push(h('text', { x: segs[slot].x, y: segs[slot].y, 'text-anchor': 'middle', class: 'seg-count' }, b ? b.entries : null));
    }
    // The hand: the level's current time.
    const am = -Math.PI / 2 + ((cursor + 0.5) * 2 * Math.PI) / size;
    const count = buckets.filter((x) => x.level === l.level).reduce((a, x) => a + x.entries, 0);
    return h('g', { class: 'ring', 'data-level': l.level },
      h('text', { x: cx, y: 12, 'text-anchor': 'middle', class: 'ring-title' }, `level ${l.level}`),
      h('text', { x: cx, y: 25, 'text-anchor': 'middle', class: 'ring-sub' }, `tick ${dur(l.tick_ms)} × ${size} = ${dur(l.interval_ms)}`),
      paths, counts,
      h('line', { x1: cx, y1: cy, x2: (cx + (r0 - 4) * Math.cos(am)).toFixed(2), y2: (cy + (r0 - 4) * Math.sin(am)).toFixed(2), class: 'hand' }),
      h('circle', { cx, cy, r: 3, fill: '#1d2330' }),
      h('text', { x: cx, y: top + 2 * R + 14, 'text-anchor': 'middle', class: 'ring-sub' }, `now ${n(l.current_time_ms)} · ${count} timer(s)`),
      h('text', { x: cx, y: top + 2 * R + 27, 'text-anchor': 'middle', class: 'ring-sub' }, `${n(l.cascaded)} cascaded · ${n(l.fired)} fired`));
  });
  // The cascade: an arrow from a flushed bucket down to the finer level.
  const cascades = arrows.flatMap((a) => {
    const from = geometry.rings[a.level], to = geometry.rings[a.level - 1];
    if (!from || !to) return [];
    const size = levels[a.level].wheel_size;
    const am = -Math.PI / 2 + ((a.slot + 0.5) * 2 * Math.PI) / size;
    const x1 = from.cx + R * Math.cos(am), y1 = from.cy + R * Math.sin(am);
    const x2 = to.cx + R + 2, y2 = to.cy;
    const life = Math.max(0, Math.min(1, (a.until - now) / 1800)).toFixed(2);
    const qx = (x1 + x2) / 2, qy = top + 8;
    return [h('path', { d: `M ${x1} ${y1} Q ${qx} ${qy} ${x2} ${y2}`, class: 'cascade-arrow', opacity: life }),
      h('text', { x: qx, y: top + 2 * R + 4, 'text-anchor': 'middle', class: 'cascade-label', opacity: life }, `${a.n} → L${a.level - 1}`)];
  });
  show('wheel', h('svg', { viewBox: `0 0 ${Math.max(1, levels.length) * W} ${H}`, role: 'img', 'aria-label': 'hierarchical timing wheel' },
    h('defs', null, h('marker', { id: 'arrowhead', viewBox: '0 0 10 10', refX: 8, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' },
      h('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#2563eb' }))),
    rings,
    h('g', { class: 'arrows' }, cascades)));

  // The bucket queue (the buckets come in expiry order).
  show('bucket-queue', buckets.length ? buckets.map((b, i) =>
    h('span', { key: `${b.level}/${b.slot}/${b.expiration_ms}`, class: 'chip' + (i === 0 ? ' next' : ''), 'data-level': b.level, 'data-slot': b.slot,
      title: `level ${b.level} slot ${b.slot}: flushed at ${n(b.expiration_ms)} ms` },
    h('b', null, `L${b.level}·s${b.slot}`), ` @${n(b.expiration_ms)} (`, countdown(b.expiration_ms), `) ×${b.entries}`))
    : h('span', { class: 'empty' }, 'empty: the driver sleeps with no deadline'));
}

// The flush log: the newest bucket flushes, those of the last 1.5 s marked.
function renderFlushes() {
  const now = performance.now();
  show('flushes', flushes.length ? flushes.slice(0, 12).map((x) => {
    const what = [x.moved_down ? `${x.moved_down} moved down to level ${x.level - 1}` : null, x.fired ? `${x.fired} fired` : null]
      .filter((t) => t).join(', ') || 'empty';
    return h('li', { key: x.number, class: now - x.fresh < 1500 ? 'fresh' : null }, `@${n(x.at_ms)} ms · level ${x.level} slot ${x.slot} expired → ${what}`);
  }) : h('li', { class: 'empty' }, 'none yet'));
}

function opName(op) {
  const d = op.description;
  const colon = d.indexOf(':');
  return colon > 0 && colon < 40 ? d.slice(0, colon) : 'operation';
}

function waitsFor(op, parts) {
  const r = op.request;
  if (r && r.request === 'Produce') {
    const items = r.partitions.filter((p) => p.required_offset !== null).map((p) => {
      const tp = `${p.topic}-${p.partition}`;
      const hw = parts.get(tp) ? parts.get(tp).high_watermark : null;
      return h('span', { class: 'waits' }, 'required offset ', h('b', { class: 'required-offset' }, p.required_offset), ` vs HW ${n(hw)} on `, h('span', null, tp));
    });
    if (items.length) return items.flatMap((x, i) => (i ? ['; ', x] : [x]));
  }
  if (r && (r.request === 'FetchFollower' || r.request === 'FetchConsumer')) {
    return r.partitions.map((p) => {
      const tp = `${p.topic}-${p.partition}`;
      const part = parts.get(tp);
      if (r.request === 'FetchFollower') return `data past ${p.offset} on ${tp} (LEO ${part ? part.log_end_offset : '?'})`;
      // A read_committed fetch waits for the last stable offset, not the HW.
      if ((op.description || '').includes('last stable offset')) {
        return `LSO past ${p.offset} on ${tp} (LSO ${part ? part.last_stable_offset : '?'}, HW ${part ? part.high_watermark : '?'})`;
      }
      return `HW past ${p.offset} on ${tp} (HW ${part ? part.high_watermark : '?'})`;
    }).join('; ');
  }
  const d = op.description;
  const at = d.indexOf(' waits for ');
  return at >= 0 ? d.slice(at + 11).replace(/ \[request \d+\]$/, '') : d;
}

// Selects the bucket of a pending operation: outlined in the wheel, its row marked.
function select(bucket) {
  selected = bucket ? { level: bucket.level, slot: bucket.slot } : null;
  renderWheel();
  renderPurgatories();
  renderCountdowns();
}

function renderPurgatories() {
  const all = frame.state.purgatories;
  const parts = partitionsByName();
  const order = Object.keys(all).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  show('purgatories', order.map((key) => {
    const p = all[key];
    const keys = p.keys.map((k) => h('span', { class: 'chip', title: 'watch key: its watcher list' }, k.key, ' ▸ ', h('b', null, k.watchers), ` watcher${k.watchers === 1 ? '' : 's'}`));
    const rows = p.pending.slice(0, SHOWN_PENDING).map((op) => {
      const r = op.request;
      const bucket = op.bucket; // null: its timeout is due, in no bucket
      const isSelected = selected && bucket && selected.level === bucket.level && selected.slot === bucket.slot;
      return h('tr', { key: r ? `r${r.seq}` : `${op.deadline_ms}/${op.description}`, class: isSelected ? 'pending-op selected' : 'pending-op',
        'data-purgatory': p.name, 'data-request': r ? r.seq : null, onclick: () => select(bucket) },
      h('td', null, r ? r.kind : opName(op)),
      h('td', { class: 'client' }, r ? who(r) : '–'),
      h('td', { class: 'num' }, r ? `#${r.correlation_id}` : '–'),
      h('td', null, waitsFor(op, parts)),
      h('td', { class: 'num', title: `times out at ${n(op.deadline_ms)} ms on the broker clock` }, `${n(op.deadline_ms)} (`, countdown(op.deadline_ms), ')'),
      h('td', { class: 'bucket', title: bucket ? 'the wheel bucket its timeout sits in' : 'its timeout is due: in no bucket' }, bucketText(bucket)));
    });
    const more = p.pending_total - rows.length;
    return h('div', { key, class: 'purgatory', 'data-purgatory': p.name },
      h('h3', null, `${p.name} purgatory`),
      h('div', { class: 'counters' },
        h('span', { title: "Kafka's PurgatorySize" }, 'watched ', h('b', null, n(p.watched))),
        h('span', { title: "Kafka's NumDelayedOperations" }, 'delayed ', h('b', null, n(p.delayed))),
        h('span', null, 'completed ', h('b', null, n(p.completed))),
        h('span', null, 'expired ', h('b', { class: 'expired-count' }, n(p.expired)))),
      h('div', { class: 'chips', style: 'margin:3px 0' }, keys.length ? keys : h('span', { class: 'empty' }, 'no watch keys')),
      rows.length
        ? h('table', null, h('thead', null, h('tr', null, h('th', null, 'operation'), h('th', null, 'client'), h('th', { class: 'num' }, 'corr'), h('th', null, 'waits for'), h('th', { class: 'num' }, 'deadline ms'), h('th', null, 'wheel bucket'))), h('tbody', null, rows))
        : h('div', { class: 'empty' }, 'nothing parked'),
      more > 0 ? h('div', { class: 'muted' }, `… and ${n(more)} more`) : null);
  }));
}

function rank(key) {
  return { produce: 0, fetch: 1, delete_records: 2, rebalance: 3, heartbeat: 4, fault_delay: 5 }[key] ?? 9;
}

// The fault rules (`/api/faults`), in the order the broker checks them, with their hits;
// a rule is added as JSON and removed by its button. What a rule holds back waits in the
// FaultDelay purgatory above, and the request table marks each request a rule fired on.
const RULE_MATCH_KEYS = ['client_id', 'topic', 'partition', 'broker', 'group', 'min_version', 'max_version'];
const RULE_TRIGGERS = ['times', 'nth', 'probability'];
let faultDraft = '{"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "times": 3}';
function renderFaults() {
  const rules = frame.state.faults || [];
  const rows = rules.map((r) => {
    const match = RULE_MATCH_KEYS.filter((k) => r[k] !== undefined).map((k) => `${k}=${r[k]}`).join(' ');
    const trigger = RULE_TRIGGERS.filter((k) => r[k] !== undefined).map((k) => `${k} ${r[k]}${k === 'probability' ? ` seed ${r.seed ?? 0}` : ''}`)[0] || 'always';
    return h('tr', { key: r.id, class: 'fault-rule', 'data-rule': r.id },
      h('td', { class: 'num' }, r.id),
      h('td', null, h('b', null, String(r.api)), match ? ` ${match}` : null),
      h('td', null, r.does),
      h('td', null, trigger),
      h('td', { class: 'num', title: 'fired / matched' }, h('b', { class: 'fault-hits' }, n(r.hits)), ` / ${n(r.matched)}`),
      h('td', null, h('button', { title: `DELETE /api/faults/${r.id}`, onclick: () => removeFault(r.id) }, 'remove')));
  });
  show('faults', [h('h3', { key: 'h' }, `Fault rules (${n(rules.length)})`),
    rows.length
      ? h('table', { key: 't' }, h('thead', null, h('tr', null, h('th', { class: 'num' }, 'id'), h('th', null, 'matches'), h('th', null, 'does'), h('th', null, 'when'), h('th', { class: 'num' }, 'hits'), h('th', null, ''))), h('tbody', null, rows))
      : h('div', { key: 'e', class: 'empty' }, 'no fault rules: every request is answered as usual'),
    h('form', { key: 'f', class: 'fault-form', onsubmit: addFault },
      h('input', { id: 'fault-rule', size: 48, value: faultDraft, 'aria-label': 'fault rule as JSON', oninput: (e) => { faultDraft = e.target.value; } }),
      h('button', { type: 'submit', title: 'POST /api/faults' }, 'Add rule'),
      rules.length ? h('button', { type: 'button', title: 'DELETE /api/faults', onclick: clearFaults }, 'Clear all') : null)]);
}

function addFault(e) {
  e.preventDefault();
  post('/api/faults', faultDraft).then((r) => r && say(`fault rule ${r.id} added`));
}

function removeFault(id) {
  call('DELETE', `/api/faults/${id}`).then((r) => r && say(`fault rule ${id} removed`));
}

function clearFaults() {
  call('DELETE', '/api/faults').then((r) => r && say(`${r.removed} fault rule(s) removed`));
}

// The group coordinator's groups: each with its state, generation and members (their
// session deadlines sit in the Heartbeat purgatory above).
function renderGroups() {
  const groups = frame.state.groups;
  show('groups', [h('h3', null, `Consumer groups (${n(groups.total)})`),
    groups.list.length ? groups.list.map((g) => h('div', { key: g.group_id, class: 'purgatory', 'data-group': g.group_id },
      h('div', null, h('b', null, g.group_id), ` · ${g.state} · generation ${g.generation_id}`,
        g.protocol ? ` · ${g.protocol}` : null, ` · offsets in ${g.offsets_partition}`,
        g.committed_offsets ? ` · ${g.committed_offsets} committed offset(s)` : null),
      g.members.length ? h('table', null, h('tbody', null, g.members.map((m) => h('tr', { key: m.member_id },
        h('td', null, m.client_id, m.leader ? ' (leader)' : null),
        h('td', { class: 'mono' }, m.member_id),
        h('td', { class: 'num', title: 'session deadline (Heartbeat purgatory)' }, 'session ends ', countdown(m.session_deadline_ms)),
        h('td', null, m.awaiting_join ? 'awaiting join' : m.awaiting_sync ? 'awaiting sync' : m.assignment.join(', ')))))) : h('div', { class: 'empty' }, 'no members')))
      : h('div', { class: 'empty' }, 'no groups')]);
}

// Whether an undecided transaction holds the partition's last stable offset below its HW.
function held(p) {
  return p.last_stable_offset >= 0 && p.last_stable_offset < p.high_watermark;
}

// Each transaction open or ending: its producer, its partitions, its age against its
// timeout (the coordinator aborts it there).
function openTransactions() {
  const open = (frame.state.transactions || []).filter((t) => t.open_ms !== null);
  if (!open.length) return null;
  return h('div', { class: 'txn-list' }, open.map((t) => h('div', { key: t.transactional_id, 'data-txn': t.transactional_id },
    h('b', null, `transaction ${t.transactional_id}`), `: ${t.state}, producer ${t.producer_id} epoch ${t.producer_epoch}, open `,
    h('span', { class: 'txn-age' }, `${(t.open_ms / 1000).toFixed(1)} s of ${(t.timeout_ms / 1000).toFixed(1)} s`),
    ` on [${t.partitions.join(', ')}]`)));
}

function renderPartitions() {
  const parts = frame.state.partitions;
  const txns = openTransactions();
  show('partitions', parts.length ? [txns, ...parts.map((p) => {
    const tp = `${p.topic}-${p.partition}`;
    const start = p.log_start_offset, end = Math.max(p.log_end_offset, start + 1);
    const pos = (o) => `${(100 * (o - start)) / (end - start)}%`;
    const marks = p.followers.map((f) => h('span', { class: 'mark', style: `left:calc(${pos(f.log_end_offset)} - 1px)`, title: `replica ${f.id} LEO ${f.log_end_offset}` }));
    const bar = h('div', { class: 'logbar', title: `log ${start}..${p.log_end_offset}, HW ${p.high_watermark}` },
      h('span', { class: 'replicated', style: `width:${pos(p.high_watermark)}` }),
      marks,
      h('span', { class: 'hw', style: `left:${pos(p.high_watermark)}` }),
      // An open transaction holds read_committed readers at the LSO, below the HW.
      held(p) ? h('span', { class: 'lso', style: `left:${pos(p.last_stable_offset)}`, title: `LSO ${p.last_stable_offset}: read_committed consumers read up to here` }) : null,
      // Near the end of the bar the HW's label would sit on the LEO's: one label says both.
      (p.high_watermark - start) / (end - start) < 0.7
        ? [h('span', { class: 'leo', style: `left:${pos(p.high_watermark)}` }, `HW ${p.high_watermark}`),
          h('span', { class: 'leo end', style: 'left:100%' }, `LEO ${p.log_end_offset}`)]
        : h('span', { class: 'leo end', style: 'left:100%' }, `HW ${p.high_watermark} · LEO ${p.log_end_offset}`));
    const rows = [h('tr', null, h('td', null, `${p.leader} (leader)`), h('td', { class: 'num' }, n(p.log_end_offset)), h('td', { class: 'num' }, '0'), h('td', { class: 'in-isr' }, 'in ISR'), h('td', null, '')),
      ...p.followers.map((f) => h('tr', { key: f.id, 'data-replica': f.id },
        h('td', null, `${f.id}`), h('td', { class: 'num' }, n(f.log_end_offset)), h('td', { class: 'num' }, n(f.lag)),
        h('td', { class: f.in_isr ? 'in-isr' : 'out-isr' }, f.in_isr ? 'in ISR' : 'OUT'),
        h('td', { class: 'muted' }, f.last_fetch_time_ms === null ? 'never fetched' : `fetched @${n(f.last_fetch_time_ms)}`)))];
    return h('div', { key: tp, class: 'partition', 'data-tp': tp },
      h('div', null, h('b', null, tp), `  LEO ${n(p.log_end_offset)} · HW `, h('b', { class: 'hw-value' }, n(p.high_watermark)),
        held(p) ? [' · LSO ', h('b', { class: 'lso-value' }, n(p.last_stable_offset))] : null,
        ` · ISR [${p.isr.join(', ')}] of [${p.replicas.join(', ')}] · min ISR ${p.effective_min_isr}`,
        p.replica_logs ? ` · leader ${p.leader < 0 ? 'none (offline)' : p.leader}, epoch ${p.leader_epoch}` : null),
      bar,
      (p.open_transactions || []).length ? h('div', { class: 'txns', 'data-open-txns': tp }, 'open transactions: ',
        p.open_transactions.map((t) => `producer ${t.producer_id} epoch ${t.producer_epoch} since offset ${n(t.first_offset)}`).join(' · '),
        ' — read_committed consumers wait at the LSO until each ends') : null,
      // With several brokers: every replica's own log, where a truncation shows.
      p.replica_logs ? h('div', { class: 'muted', 'data-replica-logs': tp }, p.replica_logs.map((r) =>
        `broker ${r.broker}${r.alive ? '' : ' (dead)'}: ${r.leader ? 'leader' : 'follower'} epoch ${r.leader_epoch}, LEO ${n(r.log_end_offset)}, HW ${n(r.high_watermark)}`).join(' · ')) : null,
      h('table', null, h('thead', null, h('tr', null, h('th', null, 'replica'), h('th', { class: 'num' }, 'LEO'), h('th', { class: 'num' }, 'lag'), h('th', null, 'ISR'), h('th', null, 'last fetch'))), h('tbody', null, rows)));
  })] : h('div', { class: 'empty' }, 'no topics yet: send a produce'));
}

// With several brokers: each one, alive or dead, with what can be done to it.
function renderBrokers() {
  const bs = frame.state.brokers || [];
  if (bs.length < 2) { show('brokers', null); return; }
  show('brokers', [h('h3', null, 'Brokers'), bs.map((b) => h('div', { key: b.id, class: 'follower', 'data-broker': b.id },
    h('span', { class: 'name' }, `broker ${b.id} `, h('b', { class: b.alive ? 'state-running' : 'state-crashed' }, b.alive ? 'alive' : 'dead'), ` ${b.listener}`),
    h('button', { onclick: () => broker(b.id, 'kill'), disabled: !b.alive, title: 'Crash it: listener and connections close, its log stays; the controller elects new leaders' }, 'kill'),
    h('button', { onclick: () => broker(b.id, 'shutdown'), disabled: !b.alive, title: 'Controlled shutdown: leadership moves away first' }, 'shut down'),
    h('button', { onclick: () => broker(b.id, 'restart'), disabled: b.alive, title: 'Back as a follower: truncates to the new leader, catches up, rejoins the ISR' }, 'restart'),
    h('button', { onclick: () => follower(b.id, 'pause'), disabled: !b.alive, title: 'Pause all of its replica fetchers' }, 'pause fetchers'),
    h('button', { onclick: () => follower(b.id, 'resume'), disabled: !b.alive }, 'resume fetchers')))]);
}

// Each follower's fetch-delay box, by replica id, for its "set delay" button.
const delayBoxes = new Map();

function renderFollowers() {
  const fs = frame.state.followers;
  if ((frame.state.brokers || []).length > 1) {
    // A cluster's followers are its brokers' replica fetchers, steered per broker above.
    show('followers', fs.length ? fs.map((f) => h('div', { key: `${f.replica_id}-${f.bootstrap}`, class: 'follower', 'data-fetcher': f.replica_id },
      h('span', { class: 'name' }, `broker ${f.replica_id} fetching from ${f.bootstrap} `, h('b', { class: `state-${f.state}` }, f.state)),
      h('span', { class: 'muted' }, f.partitions.map((p) => `${p.topic}-${p.partition} @${n(p.log_end_offset)}`).join(' · '))))
      : h('div', { class: 'empty' }, 'no replica fetchers'));
    return;
  }
  show('followers', fs.length ? fs.map((f) => {
    const id = f.replica_id;
    if (!delayBoxes.has(id)) delayBoxes.set(id, preact.createRef());
    const box = delayBoxes.get(id);
    return h('div', { key: id, class: 'follower', 'data-follower': id },
      h('span', { class: 'name' }, `replica ${id} `, h('b', { class: `state-${f.state}` }, f.state), f.connected ? null : ' (not connected)'),
      h('button', { onclick: () => follower(id, 'pause'), disabled: f.state === 'paused' }, 'pause'),
      h('button', { onclick: () => follower(id, 'resume'), disabled: f.state === 'running' }, 'resume'),
      h('button', { onclick: () => follower(id, 'crash') }, 'crash'),
      h('button', { onclick: () => follower(id, 'restart') }, 'restart'),
      // The broker's delay is the box's default value, not its value: what is being typed
      // into it stays while frames come in.
      h('input', { ref: box, type: 'number', min: 0, defaultValue: f.fetch_delay_ms, 'aria-label': `fetch delay of follower ${id}` }),
      h('button', { onclick: () => follower(id, 'delay', Math.max(0, Number(box.current.value) || 0)) }, 'set delay'));
  }) : h('div', { class: 'empty' }, 'no embedded followers'));
}

function renderEvents() {
  show('events', events.length ? events.slice(0, 30).map((e) =>
    h('li', { key: e.seq, class: e.kind === 'isr_shrink' || e.kind === 'truncated' ? 'err' : null, 'data-kind': e.kind }, `@${n(e.at_ms)} ms · ${e.topic}-${e.partition} · ${e.text}`))
    : h('li', { class: 'empty' }, 'none yet'));
}

function causeText(r) {
  const c = r.cause;
  switch (c.kind) {
    case 'follower_fetch': return `HW ${c.high_watermark} at follower ${c.replica} fetch #${c.correlation_id} @${c.fetch_offset}`;
    case 'append': return `data appended by request ${c.request}`;
    case 'isr_shrink': return `ISR shrink moved the HW to ${c.high_watermark}`;
    case 'expired': return 'expired (timeout fired in the wheel)';
    case 'error': return 'error';
    case 'immediate': return r.purgatory ? 'completed at once' : 'not parked';
    default: return r.state === 'parked' ? `parked in ${r.purgatory}…` : '–'; // `unknown`: not ended yet
  }
}

const PHASES = ['request_queue', 'local', 'remote', 'response_queue', 'response_send'];
const PHASE_LABEL = { request_queue: 'queue', local: 'local', remote: 'remote', response_queue: 'resp-queue', response_send: 'send' };

let newestSeq = 0;

// Notes how many requests a frame brought that the page had not seen.
function noteArrivals(f) {
  const before = newestSeq;
  let fresh = 0;
  for (const r of f.requests) {
    if (r.seq > before) fresh++;
    newestSeq = Math.max(newestSeq, r.seq);
  }
  requestsPace.note(fresh);
}

function renderRequests() {
  const client = document.getElementById('filter-client').value.trim().toLowerCase();
  const topic = document.getElementById('filter-topic').value.trim().toLowerCase();
  const now = nowMs();
  const rows = [...requests.values()]
    .filter((r) => !client || r.client_id.toLowerCase().includes(client))
    .filter((r) => !topic || r.partitions.some((p) => p.topic.toLowerCase().includes(topic)))
    .sort((a, b) => b.seq - a.seq)
    .slice(0, SHOWN_REQUESTS);
  // Rows are keyed by request: a row already shown keeps its node as newer rows push in
  // above it, and only a request that changed (finished, say) has its cells changed.
  show('request-rows', rows.length ? rows.map((r) => requestRow(r, now))
    : h('tr', null, h('td', { colspan: 7, class: 'empty' }, 'no requests yet')));
}

// One row of the request table.
function requestRow(r, now) {
  const ph = r.phases_ms;
  const waiting = r.state !== 'done';
  const total = ph.total;
  const segs = PHASES.map((k) => {
    const v = ph[k];
    if (v === null) return null;
    return h('span', { class: `ph ${k}`, style: `flex-grow:${Math.max(v, total ? total / 400 : 0.0001)}`, title: `${PHASE_LABEL[k]} ${msText(v)} ms` });
  });
  if (waiting && r.purgatory) segs.push(h('span', { class: 'waiting', style: 'flex-grow:1000', title: 'parked: waiting in the purgatory' }));
  const phaseText = waiting
    ? (r.purgatory ? `parked in ${r.purgatory} for ${n(Math.max(0, Math.round(now - r.at_ms)))} ms (broker clock), deadline ${n(r.deadline_ms)}` : 'in flight')
    : PHASES.map((k) => `${PHASE_LABEL[k]} ${msText(ph[k])}`).join(' · ') + ' ms';
  const tps = r.partitions.map((p) => {
    let t = `${p.topic}-${p.partition}`;
    if (r.request === 'Produce' && p.offset >= 0) t += ` @${p.offset}`;
    if (r.request.startsWith('Fetch')) t += ` from ${p.offset}`;
    return t;
  }).join(', ');
  return h('tr', { key: r.seq, class: `request state-${r.state}`, 'data-seq': r.seq, 'data-request': r.request, 'data-remote-ms': ph.remote ?? '', title: r.story },
    h('td', { class: 'num' }, r.seq),
    h('td', null, `${r.request} v${r.api_version} #${r.correlation_id}`, r.acks !== null ? ` acks=${r.acks === -1 ? 'all' : r.acks}` : null),
    h('td', { class: 'client' }, who(r)),
    h('td', { class: 'tps' }, tps),
    h('td', null, h('div', { class: 'bar' }, segs), h('div', { class: 'phases' }, phaseText)),
    h('td', { class: 'num' }, waiting ? '…' : `${msText(total)} ms`),
    h('td', { class: 'cause' }, causeText(r), r.error ? h('span', { class: 'err' }, ` ${r.error}`) : null,
      r.fault ? h('span', { class: 'fault', title: 'a fault rule fired on this request' }, ` ⚡ rule ${r.fault.rule}: ${r.fault.action}`) : null));
}

// The countdowns to deadlines and bucket flushes, on the broker clock (see `countdown`).
function renderCountdowns() {
  const now = nowMs();
  for (const el of document.querySelectorAll('main .countdown')) {
    textIfChanged(el, `in ${n(Math.max(0, Math.round(Number(el.dataset.at) - now)))} ms`);
  }
}

// Between frames: the clock and the countdowns move on. Skipped while frames arrive (each
// frame draws them), so a busy page repaints once per frame, not twice.
setInterval(() => {
  if (!frame || performance.now() - frameAt < 100) return;
  renderClock();
  // Fading flashes and arrows, and the mark on fresh flushes.
  if (flashes.length || arrows.length) {
    drawn.wheel = null;
    renderWheel();
  }
  renderCountdowns();
  if (flushes.length && performance.now() - flushes[0].fresh < 1700) flushesPace.schedule();
  for (const pace of [requestsPace, eventsPace, flushesPace]) pace.showPace();
}, 100);

import(PREACT).then((module) => {
  preact = module;
  h = module.h;
  setupControls();
  connect();
}, (e) => say(`the page could not load ${PREACT}: ${e}`, true));
