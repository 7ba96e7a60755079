"""The live timeline component: a ``gr.HTML`` holding a canvas, redrawn by a few lines of JS.

Its value is ``viz.live_payload``'s JSON. Each time the handler yields a new value the browser
paints every span as a rectangle, idle gaps as red hatched bands, the lanes and a time axis: far
cheaper than a plotly redraw, on cores the engine shares. The canvas says how many spans it drew
(``data-spans``) and whether they are a recording shown while the reader's run waits
(``data-recording``).
"""

from __future__ import annotations

import gradio as gr

TEMPLATE = '<div class="live-chart"><canvas></canvas></div>'
CSS = ".live-chart canvas {width: 100%; display: block;}"
DRAW_JS = """
const LANE = 30, TITLE = 22, GAP = 14, AXIS = 34, LEFT = 150, NOTE = 30;   // sizes in px
function draw() {
  const canvas = element.querySelector('canvas');
  if (!canvas) return;
  let data;
  try { data = JSON.parse(props.value || '{}'); } catch (e) { data = {}; }
  const runs = data.runs || [];
  const width = canvas.parentElement.clientWidth || 900;
  const note = data.recording || '';
  let height = AXIS + (note ? NOTE : 0);
  for (const run of runs) height += TITLE * run.titles.length + run.lanes.length * LANE + GAP;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr; canvas.height = height * dpr;
  canvas.style.height = height + 'px';
  const ctx = canvas.getContext('2d');
  ctx.scale(dpr, dpr);
  ctx.clearRect(0, 0, width, height);
  const plot = width - LEFT - 10, end = Math.max(data.end_ms || 1, 1e-3);
  const x = ms => LEFT + plot * ms / end;
  ctx.font = '12px Inter, "Noto Sans SC", sans-serif';
  const tile = document.createElement('canvas');
  tile.width = tile.height = 6;
  const t = tile.getContext('2d');
  t.strokeStyle = data.idle_line || 'red'; t.beginPath(); t.moveTo(0, 6); t.lineTo(6, 0);
  t.stroke();
  const hatch = ctx.createPattern(tile, 'repeat');
  let top = 0, spans = 0;
  if (note) {                           // a recording, not the reader's run: said above it
    ctx.fillStyle = 'rgba(117,107,177,.14)'; ctx.fillRect(0, 0, width, NOTE - 6);
    ctx.fillStyle = '#54278f'; ctx.font = 'bold 13px Inter, "Noto Sans SC", sans-serif';
    ctx.fillText(note, 6, 17, width - 12);
    top = NOTE;
  }
  for (const run of runs) {
    ctx.fillStyle = '#222'; ctx.font = 'bold 13px Inter, "Noto Sans SC", sans-serif';
    run.titles.forEach(line => {          // the title, then a busy badge's lines, if any
      ctx.fillText(line, 4, top + 15, width - 8);
      ctx.font = '12px Inter, "Noto Sans SC", sans-serif'; ctx.fillStyle = data.badge_color;
      top += TITLE; });
    run.lanes.forEach((lane, i) => { ctx.fillStyle = '#444';
      ctx.fillText(lane, 4, top + i * LANE + LANE / 2 + 4, LEFT - 8); });
    if (run.gpu_rows.length) {            // GPU idle: a red hatched band over the GPU lanes
      const y0 = top + Math.min(...run.gpu_rows) * LANE;
      const y1 = top + (Math.max(...run.gpu_rows) + 1) * LANE;
      ctx.fillStyle = data.quiet_fill;    // no request in the system: plain grey
      for (const [a, b] of (run.quiet || [])) ctx.fillRect(x(a), y0, Math.max(x(b) - x(a), 0.5), y1 - y0);
      for (const [a, b] of run.gaps) {
        const w = Math.max(x(b) - x(a), 0.5);
        ctx.fillStyle = data.idle_fill; ctx.fillRect(x(a), y0, w, y1 - y0);
        ctx.fillStyle = hatch; ctx.fillRect(x(a), y0, w, y1 - y0);
      }
    }
    for (const [lane, color, a, b] of run.spans) {
      ctx.fillStyle = run.palette[color];
      ctx.fillRect(x(a), top + lane * LANE + LANE * 0.14, Math.max(x(b) - x(a), 0.6), LANE * 0.72);
      spans += 1;
    }
    top += run.lanes.length * LANE + GAP;
  }
  ctx.fillStyle = '#666';
  for (let i = 0; i <= 5; i++) {
    const ms = end * i / 5, label = ms.toFixed(end < 10 ? 1 : 0);
    ctx.textAlign = i === 0 ? 'left' : (i === 5 ? 'right' : 'center');
    ctx.fillText(label, x(ms), top + 14);
  }
  ctx.textAlign = 'left';
  if (data.axis) ctx.fillText(data.axis, LEFT + plot / 2 - 60, top + 30);
  canvas.dataset.spans = spans;
  canvas.dataset.recording = note ? '1' : '';
}
draw();
watch('value', draw);
window.addEventListener('resize', draw);
"""


def live_chart(**kwargs) -> gr.HTML:
    """The component (hidden until a run starts)."""
    return gr.HTML("", html_template=TEMPLATE, css_template=CSS, js_on_load=DRAW_JS,
                   elem_id="live-chart", visible=False, **kwargs)
