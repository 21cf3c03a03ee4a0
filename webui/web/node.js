// The node page: the node's fields and ports and history from the REST
// API, its timeline from the UI's server, its console, and the verbs,
// each sent to the REST API after a confirmation. The page follows the
// node's changes on the event stream.
'use strict';
(function () {
  const body = document.body;
  const prefix = body.dataset.prefix, api = body.dataset.api, uuid = body.dataset.node, consolePath = body.dataset.console;
  const $ = (id) => document.getElementById(id);
  const page = window.anvilNode = { node: null, timelineAt: 0, historyAt: 0, actions: [] };

  async function apiCall(method, path, payload) {
    const init = { method: method, headers: { 'X-OpenStack-Ironic-API-Version': 'latest', Accept: 'application/json' } };
    if (payload !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(payload);
    }
    const resp = await fetch(api + path, init);
    const text = await resp.text();
    if (!resp.ok) {
      let msg = text;
      try {
        const doc = JSON.parse(text);
        msg = doc.error_message ? JSON.parse(doc.error_message).faultstring : (doc.faultstring || text);
      } catch (e) { /* plain text */ }
      throw new Error(resp.status + ': ' + msg);
    }
    return text ? JSON.parse(text) : null;
  }

  function text(id, v) { $(id).textContent = v === null || v === undefined || v === '' ? '\u2014' : String(v); }

  // The verbs: the API call each makes and the states it makes sense in.
  const verbs = [
    { name: 'manage', path: '/states/provision', body: { target: 'manage' }, in: ['enroll', 'available', 'inspect failed', 'clean failed', 'adopt failed'] },
    { name: 'inspect', path: '/states/provision', body: { target: 'inspect' }, in: ['manageable', 'inspect failed'] },
    { name: 'provide', path: '/states/provision', body: { target: 'provide' }, in: ['manageable'] },
    { name: 'deploy', path: '/states/provision', body: { target: 'active' }, in: ['available', 'deploy failed'] },
    { name: 'undeploy', path: '/states/provision', body: { target: 'deleted' }, in: ['active', 'deploy failed', 'error', 'wait call-back'] },
    { name: 'abort', path: '/states/provision', body: { target: 'abort' }, in: ['clean wait', 'inspect wait', 'rescue wait', 'wait call-back', 'service wait', 'inspecting'] },
    { name: 'power on', path: '/states/power', body: { target: 'power on' } },
    { name: 'power off', path: '/states/power', body: { target: 'power off' } },
    { name: 'reboot', path: '/states/power', body: { target: 'rebooting' } },
    { name: 'set maintenance', method: 'PUT', path: '/maintenance', reason: true, when: (n) => !n.maintenance },
    { name: 'clear maintenance', method: 'DELETE', path: '/maintenance', when: (n) => n.maintenance },
    { name: 'enable console', path: '/states/console', body: { enabled: true }, when: (n) => !n.console_enabled },
    { name: 'disable console', path: '/states/console', body: { enabled: false }, when: (n) => n.console_enabled },
  ];

  function confirmVerb(v) {
    return new Promise((resolve) => {
      const d = $('confirm');
      $('confirm-text').textContent = 'Really ' + v.name + ' node ' + (page.node.name || uuid) + '?';
      $('confirm-reason-label').hidden = !v.reason;
      $('confirm-reason').value = '';
      const done = (ok) => {
        $('confirm-ok').onclick = $('confirm-cancel').onclick = null;
        d.close();
        resolve(ok ? { reason: $('confirm-reason').value } : null);
      };
      $('confirm-ok').onclick = () => done(true);
      $('confirm-cancel').onclick = () => done(false);
      d.showModal();
    });
  }

  async function run(v) {
    const answer = await confirmVerb(v);
    const notice = $('notice');
    if (!answer) {
      notice.className = '';
      notice.textContent = v.name + ': cancelled';
      return;
    }
    let payload = v.body;
    if (v.reason) payload = { reason: answer.reason };
    try {
      await apiCall(v.method || 'PUT', '/v1/nodes/' + uuid + v.path, payload);
      notice.className = '';
      notice.textContent = v.name + ': accepted';
      page.actions.push(v.name);
    } catch (e) {
      notice.className = 'err';
      notice.textContent = v.name + ': ' + e.message;
    }
    refreshNode();
  }

  function drawVerbs(n) {
    const out = verbs.map((v) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = v.name;
      b.dataset.verb = v.name;
      b.disabled = (v.in && !v.in.includes(n.provision_state)) || (v.when && !v.when(n));
      b.onclick = () => run(v);
      return b;
    });
    $('verbs').replaceChildren(...out);
  }

  function drawFields(n) {
    const rows = Object.keys(n).filter((k) => k !== 'links' && k !== 'ports' && k !== 'portgroups' && k !== 'states' && k !== 'volume').sort().map((k) => {
      const tr = document.createElement('tr');
      const th = document.createElement('th');
      th.textContent = k;
      const td = document.createElement('td');
      td.className = 'v';
      const v = n[k];
      td.textContent = v !== null && typeof v === 'object' ? JSON.stringify(v, null, 1) : String(v);
      tr.append(th, td);
      return tr;
    });
    $('fields').tBodies[0].replaceChildren(...rows);
  }

  async function refreshNode() {
    try {
      const n = await apiCall('GET', '/v1/nodes/' + uuid);
      page.node = n;
      text('name', n.name || n.uuid);
      document.title = 'Anvil node ' + (n.name || n.uuid);
      text('pstate', n.provision_state + (n.target_provision_state ? ' \u2192 ' + n.target_provision_state : ''));
      text('power', n.power_state);
      text('maint', n.maintenance ? 'yes: ' + (n.maintenance_reason || '') : 'no');
      text('cond', n.conductor);
      text('lasterr', n.last_error);
      drawVerbs(n);
      drawFields(n);
      refreshConsole(n);
    } catch (e) {
      $('notice').className = 'err';
      $('notice').textContent = String(e.message || e);
    }
  }

  async function refreshPorts() {
    const doc = await apiCall('GET', '/v1/nodes/' + uuid + '/ports?detail=True');
    const rows = doc.ports.map((p) => {
      const tr = document.createElement('tr');
      const llc = p.local_link_connection || {};
      for (const v of [p.address, p.pxe_enabled ? 'yes' : 'no', p.physical_network || '', [llc.switch_info, llc.port_id].filter(Boolean).join(' '), p.uuid]) {
        const td = document.createElement('td');
        td.textContent = v;
        tr.appendChild(td);
      }
      return tr;
    });
    $('ports').tBodies[0].replaceChildren(...rows);
  }

  let olderURL = null;
  async function refreshHistory(more) {
    const path = more && olderURL ? olderURL : '/v1/nodes/' + uuid + '/history?detail=True&sort_dir=desc&limit=25';
    const doc = await apiCall('GET', path);
    const rows = doc.history.map((e) => {
      const tr = document.createElement('tr');
      tr.className = 'sev-' + e.severity;
      const inState = e.duration_seconds === undefined || e.duration_seconds === null ? '' : window.anvilTimeline.duration(e.duration_seconds * 1000);
      for (const v of [new Date(e.created_at).toLocaleString(), e.severity, e.event_type, e.state || '', inState, e.event]) {
        const td = document.createElement('td');
        td.textContent = v;
        tr.appendChild(td);
      }
      return tr;
    });
    const tbody = $('history').tBodies[0];
    if (more) tbody.append(...rows); else tbody.replaceChildren(...rows);
    if (doc.next) {
      const u = new URL(doc.next, location.href);
      olderURL = u.pathname.slice(api.length) + u.search;
    } else {
      olderURL = null;
    }
    $('older').hidden = !olderURL;
    page.historyAt = Date.now();
  }

  async function refreshTimeline() {
    const resp = await fetch(prefix + '/api/nodes/' + uuid + '/timeline', { headers: { Accept: 'application/json' } });
    if (!resp.ok) return;
    window.anvilTimeline.draw($('timeline'), await resp.json());
    page.timelineAt = Date.now();
  }

  let consoleURL = '';
  async function refreshConsole(n) {
    const frame = $('console'), note = $('console-note');
    if (!consolePath) {
      note.textContent = 'This server shows no consoles.';
      return;
    }
    if (!n.console_enabled) {
      frame.hidden = true;
      frame.removeAttribute('src');
      consoleURL = '';
      note.textContent = 'The console is disabled; enable it above.';
      return;
    }
    if (consoleURL) return;
    const resp = await fetch(prefix + '/api/nodes/' + uuid + '/console', { headers: { Accept: 'application/json' } });
    const doc = resp.ok ? await resp.json() : { reason: resp.status + ' ' + (await resp.text()) };
    if (!doc.url) {
      note.textContent = 'Console: ' + doc.reason;
      return;
    }
    consoleURL = doc.url;
    note.textContent = '';
    frame.src = doc.url;
    frame.hidden = false;
  }

  // Changes come in bursts: redraw at most every 500 ms.
  let timer = 0, pending = false;
  function changed() {
    if (timer) { pending = true; return; }
    refreshNode(); refreshTimeline(); refreshHistory(false);
    timer = setTimeout(() => { timer = 0; if (pending) { pending = false; changed(); } }, 500);
  }

  $('older').onclick = () => refreshHistory(true);
  const es = new EventSource(prefix + '/api/events?node=' + encodeURIComponent(uuid));
  es.onopen = () => { $('live').textContent = 'live'; $('live').className = 'live on'; };
  es.onerror = () => { $('live').textContent = 'reconnecting'; $('live').className = 'live off'; };
  es.onmessage = changed;
  refreshNode();
  refreshPorts().catch(() => {});
  refreshTimeline();
  refreshHistory(false).catch(() => {});
  window.addEventListener('resize', () => refreshTimeline());
})();
