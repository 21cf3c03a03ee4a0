// Draws a node's timeline (GET {prefix}/api/nodes/{uuid}/timeline): one
// block per provisioning phase, one row per lane (provision states with
// waits hatched, boot stages, steps, agent heartbeats, warnings), bars on
// the phase's own time axis, failures in red.
'use strict';
window.anvilTimeline = (function () {
  const NS = 'http://www.w3.org/2000/svg';
  const LABEL_W = 70, LANE_H = 22, AXIS_H = 18, MIN_W = 2;

  function el(name, attrs, text) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function duration(ms) {
    if (ms < 1000) return Math.round(ms) + ' ms';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
    const m = Math.floor(s / 60), r = Math.round(s % 60);
    if (m < 60) return m + ' min ' + r + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }

  // niceStep is a tick interval giving about n ticks over span ms.
  function niceStep(span, n) {
    const raw = span / n;
    const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 900000, 1800000, 3600000];
    for (const s of steps) if (s >= raw) return s;
    return Math.ceil(raw / 3600000) * 3600000;
  }

  function drawPhase(ph, width) {
    const wrap = document.createElement('div');
    wrap.className = 'phase';
    wrap.dataset.phase = ph.name;
    const title = document.createElement('div');
    title.className = 'phase-title' + (ph.failed ? ' failed' : '');
    const span = Math.max(ph.end - ph.start, 0.001);
    title.textContent = ph.name + (ph.result ? ' \u2192 ' + ph.result : ' (running)') + ', ' + duration(span) + ', from ' +
      new Date(ph.start).toLocaleString();
    wrap.appendChild(title);
    const lanes = ph.lanes.filter((l) => l.bars.length > 0);
    const h = AXIS_H + lanes.length * LANE_H + 4;
    const svg = el('svg', { viewBox: '0 0 ' + width + ' ' + h, height: h, role: 'img', 'aria-label': title.textContent });
    const defs = el('defs', {});
    const pat = el('pattern', { id: 'hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
    pat.appendChild(el('rect', { width: 6, height: 6, fill: '#e7ebf2' }));
    pat.appendChild(el('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#9aa4b8', 'stroke-width': 2 }));
    defs.appendChild(pat);
    svg.appendChild(defs);
    const plotW = width - LABEL_W - 8;
    // The axis also covers the rest of the phase's boot drawn past its end
    // (an agent's lookup after in-band inspection).
    let last = ph.end;
    for (const l of lanes) for (const b of l.bars) last = Math.max(last, b.end);
    const axis = Math.max(last - ph.start, span);
    const x = (t) => LABEL_W + ((t - ph.start) / axis) * plotW;
    const step = niceStep(axis, 8);
    for (let t = 0; t <= axis; t += step) {
      const tx = x(ph.start + t);
      svg.appendChild(el('line', { class: 'tick', x1: tx, x2: tx, y1: AXIS_H - 4, y2: h }));
      svg.appendChild(el('text', { class: 'tick', x: tx + 2, y: 11 }, '+' + duration(t)));
    }
    lanes.forEach((lane, i) => {
      const y = AXIS_H + i * LANE_H;
      svg.appendChild(el('text', { class: 'lane', x: 0, y: y + 15 }, lane.name));
      for (const b of lane.bars) {
        const x0 = x(b.start), w = Math.max(x(b.end) - x0, MIN_W);
        const g = el('g', { class: 'bar-group', 'data-lane': lane.name, 'data-label': b.label, 'data-kind': b.kind,
          'data-start': String(b.start), 'data-end': String(b.end), 'data-failed': b.failed ? '1' : '0' });
        const r = el('rect', { class: 'bar k-' + b.kind + (b.failed ? ' failed' : ''), x: x0, y: y + 3, width: w, height: LANE_H - 6, rx: 2 });
        const tip = b.label + (b.end > b.start ? ', ' + duration(b.end - b.start) : '') + (b.kind === 'wait' ? ' (waiting)' : '') +
          (b.failed ? ', failed' : '') + (b.detail ? '\n' + b.detail : '');
        r.appendChild(el('title', {}, tip));
        g.appendChild(r);
        const label = b.label;
        if (w > label.length * 6 + 6) g.appendChild(el('text', { class: 'in', x: x0 + 3, y: y + 15 }, label));
        svg.appendChild(g);
      }
    });
    wrap.appendChild(svg);
    return wrap;
  }

  function draw(container, tl) {
    const width = Math.max(container.clientWidth - 20, 600);
    const out = tl.phases.slice().reverse().map((ph) => drawPhase(ph, width));
    if (out.length === 0) {
      const p = document.createElement('p');
      p.className = 'muted';
      p.textContent = 'No provisioning yet.';
      out.push(p);
    }
    container.replaceChildren(...out);
  }

  return { draw: draw, duration: duration };
})();
