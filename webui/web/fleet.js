// The fleet page: every node's row from the snapshot, kept current by the
// server's event stream (no polling), drawn as a virtual list so that only
// the rows on screen exist in the document.
'use strict';
(function () {
  const ROW_H = 28;
  const OVERSCAN = 8;
  const body = document.body;
  const prefix = body.dataset.prefix;
  const viewport = document.getElementById('viewport');
  const spacer = document.getElementById('spacer');
  const live = document.getElementById('live');
  const count = document.getElementById('count');
  const stateSel = document.getElementById('state');
  const summary = document.getElementById('summary');
  const q = document.getElementById('q');
  const powerSel = document.getElementById('power');
  const maint = document.getElementById('maint');
  const errors = document.getElementById('errors');

  // The page's state, exposed for tests and curious operators.
  const fleet = window.anvilFleet = {
    loaded: false, loadedAt: 0, count: 0, shown: 0, patches: 0,
    // renderedAt maps a node's UUID to when (Date.now()) a change of it
    // was last applied and drawn; drawnState to the provision state it
    // had then (a change applied but not drawn yet leaves both as they
    // were).
    renderedAt: {}, drawnState: {},
  };

  const nodes = new Map(); // uuid -> row
  fleet.row = (uuid) => nodes.get(uuid);
  let all = [];            // rows sorted by name then UUID
  let view = [];           // rows passing the filters
  let resort = true, refilter = true, scheduled = false;
  const touched = new Set();
  let buffered = null;     // patches received before the snapshot
  const pool = [];         // row elements by slot

  const busy = new Set(['verifying', 'cleaning', 'clean wait', 'deploying', 'wait call-back', 'deleting', 'inspecting',
    'inspect wait', 'rescuing', 'rescue wait', 'unrescuing', 'adopting', 'servicing', 'service wait']);

  function stateClass(s) {
    if (!s) return '';
    if (s.endsWith('failed') || s === 'error') return 'st-failed';
    if (s === 'active') return 'st-active';
    if (busy.has(s)) return 'st-busy';
    return '';
  }

  function schedule() {
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(render);
    }
  }

  function apply(p) {
    if (p.deleted) {
      if (nodes.delete(p.uuid)) { resort = true; refilter = true; }
      return;
    }
    let r = nodes.get(p.uuid);
    if (!r) {
      if (p.provision_state === undefined) return; // a patch of a node not seen yet
      r = { uuid: p.uuid, at: 0 };
      nodes.set(p.uuid, r);
      resort = true;
    }
    if (p.at && r.at && p.at < r.at) return; // older than what we hold
    for (const k in p) {
      if (k !== 'uuid') r[k] = p[k];
    }
    if (p.name !== undefined) resort = true;
    refilter = true;
    touched.add(p.uuid);
  }

  function filtered() {
    const text = q.value.trim().toLowerCase();
    const st = stateSel.value, pw = powerSel.value, m = maint.checked, e = errors.checked;
    return all.filter((r) => {
      if (st && r.provision_state !== st) return false;
      if (pw && (pw === 'none' ? r.power_state : r.power_state !== pw)) return false;
      if (m && !r.maintenance) return false;
      if (e && !r.last_error) return false;
      if (text && !(r.name || '').toLowerCase().includes(text) && !r.uuid.includes(text)) return false;
      return true;
    });
  }

  function updateStates() {
    const counts = new Map();
    for (const r of all) counts.set(r.provision_state, (counts.get(r.provision_state) || 0) + 1);
    const names = [...counts.keys()].sort();
    const have = new Set([...stateSel.options].map((o) => o.value));
    for (const n of names) {
      if (!have.has(n)) {
        const o = document.createElement('option');
        o.value = n; o.textContent = n;
        stateSel.appendChild(o);
      }
    }
    summary.replaceChildren(...names.map((n) => {
      const s = document.createElement('span');
      s.className = stateClass(n);
      s.textContent = n + ' ' + counts.get(n).toLocaleString();
      return s;
    }));
  }

  function cell(cls) {
    const s = document.createElement('span');
    s.className = cls;
    return s;
  }

  function slot(i) {
    let el = pool[i];
    if (!el) {
      el = document.createElement('a');
      el.className = 'row';
      el.setAttribute('role', 'row');
      for (const c of ['c-name', 'c-uuid', 'c-state', 'c-power', 'c-maint', 'c-health', 'c-cond', 'c-act', 'c-err']) el.appendChild(cell(c));
      pool[i] = el;
      spacer.appendChild(el);
    }
    return el;
  }

  function fill(el, r, index) {
    el.style.top = (index * ROW_H) + 'px';
    el.hidden = false;
    if (el.dataset.uuid !== r.uuid) {
      el.dataset.uuid = r.uuid;
      el.href = prefix + '/nodes/' + r.uuid;
    }
    const c = el.children;
    const state = r.provision_state + (r.target_provision_state ? ' \u2192 ' + r.target_provision_state : '');
    el.dataset.state = r.provision_state;
    c[0].textContent = r.name || '';
    c[1].textContent = r.uuid.slice(0, 8);
    c[1].title = r.uuid;
    c[2].textContent = state;
    c[2].className = 'c-state ' + stateClass(r.provision_state);
    c[3].textContent = r.power_state || 'unknown';
    c[4].textContent = r.maintenance ? 'yes' : '';
    c[5].textContent = r.health || '';
    c[6].textContent = r.conductor || '';
    c[7].textContent = r.activity || '';
    c[8].textContent = r.last_error || '';
    c[8].title = r.last_error || '';
    c[8].className = 'c-err err';
  }

  function render() {
    scheduled = false;
    if (resort) {
      all = [...nodes.values()];
      all.sort((a, b) => (a.name || '\uffff').localeCompare(b.name || '\uffff') || a.uuid.localeCompare(b.uuid));
      resort = false;
      refilter = true;
    }
    if (refilter) {
      view = filtered();
      updateStates();
      refilter = false;
    }
    spacer.style.height = (view.length * ROW_H) + 'px';
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW_H) - OVERSCAN);
    const last = Math.min(view.length, Math.ceil((viewport.scrollTop + viewport.clientHeight) / ROW_H) + OVERSCAN);
    let i = 0;
    for (let k = first; k < last; k++, i++) {
      const el = slot(i);
      const r = view[k];
      const was = el.dataset.uuid === r.uuid;
      fill(el, r, k);
      if (was && touched.has(r.uuid)) {
        el.classList.remove('flash');
        void el.offsetWidth; // restart the animation
        el.classList.add('flash');
      }
    }
    for (; i < pool.length; i++) pool[i].hidden = true;
    const now = Date.now();
    for (const u of touched) {
      fleet.renderedAt[u] = now;
      const r = nodes.get(u);
      if (r) fleet.drawnState[u] = r.provision_state;
    }
    touched.clear();
    fleet.count = nodes.size;
    fleet.shown = view.length;
    count.textContent = view.length.toLocaleString() + ' of ' + nodes.size.toLocaleString() + ' nodes';
  }

  async function loadSnapshot() {
    const resp = await fetch(prefix + '/api/fleet', { headers: { Accept: 'application/json' } });
    if (!resp.ok) throw new Error('fleet: ' + resp.status + ' ' + (await resp.text()));
    const snap = await resp.json();
    document.getElementById('conductor').textContent = 'conductor ' + snap.conductor;
    const seen = new Set();
    for (const r of snap.nodes) {
      seen.add(r.uuid);
      const old = nodes.get(r.uuid);
      if (!old || !old.at || r.at >= old.at) nodes.set(r.uuid, r);
    }
    for (const u of [...nodes.keys()]) if (!seen.has(u)) nodes.delete(u);
    resort = true;
    const early = buffered || [];
    buffered = null;
    for (const p of early) apply(p);
    render();
    if (!fleet.loaded) {
      fleet.loaded = true;
      fleet.loadedAt = performance.now();
    }
  }

  function resync() {
    buffered = buffered || [];
    loadSnapshot().catch((e) => { live.textContent = String(e); live.className = 'live off'; });
  }

  function connect() {
    buffered = [];
    const es = new EventSource(prefix + '/api/events');
    let opened = false;
    es.onopen = () => {
      live.textContent = 'live';
      live.className = 'live on';
      // A reconnection may have missed changes: read the fleet again.
      if (opened) resync();
      opened = true;
    };
    es.onerror = () => {
      live.textContent = 'reconnecting';
      live.className = 'live off';
    };
    es.onmessage = (ev) => {
      const patches = JSON.parse(ev.data);
      fleet.patches += patches.length;
      if (buffered) {
        buffered.push(...patches);
        return;
      }
      for (const p of patches) apply(p);
      schedule();
    };
    es.addEventListener('resync', resync);
    return es;
  }

  for (const el of [q, stateSel, powerSel, maint, errors]) {
    el.addEventListener('input', () => { refilter = true; schedule(); });
  }
  viewport.addEventListener('scroll', schedule, { passive: true });
  window.addEventListener('resize', schedule);
  connect();
  loadSnapshot().catch((e) => { live.textContent = String(e); live.className = 'live off'; });
})();
