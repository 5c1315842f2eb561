// The zoom relay (dashboard/zoom.py): tells the server when the user zooms, pans or resets a chart.
// An st.components.v2 module, run in the page itself (no iframe, no build step, no network).
// It listens for nothing until the user touches a chart: a pointer, wheel or double-click on a
// Plotly chart binds that chart's plotly_relayout once; its axis changes are collected per chart
// key (the `st-key-<key>` class of the chart's element) and sent, debounced, as one trigger value
// {key: {axis: [lo, hi] or null}} (null: the axis was reset to its full extent). Nothing is sent
// on a draw or a redraw, so the relay causes a rerun only when the user changes a chart's view.
const AXIS_EDIT = /^([xy]axis\d*)\.(range|range\[[01]\]|autorange)$/;
const QUIET_MS = 350;

function chartKey(gd) {
  for (let el = gd; el && el !== document.body; el = el.parentElement) {
    for (const name of el.classList) {
      if (name.startsWith("st-key-")) return name.slice("st-key-".length);
    }
  }
  return null;
}

function axisChanges(gd, edit) {
  const changes = {};
  for (const [path, value] of Object.entries(edit || {})) {
    const match = AXIS_EDIT.exec(path);
    if (!match) continue;
    const axis = match[1];
    if (match[2] === "autorange") {
      if (value === true) changes[axis] = null;
      continue;
    }
    const range = gd._fullLayout && gd._fullLayout[axis] && gd._fullLayout[axis].range;
    if (Array.isArray(range) && range.length === 2) changes[axis] = [range[0], range[1]];
  }
  return changes;
}

function relay() {
  if (window.__ssgdZoomRelay) return window.__ssgdZoomRelay;
  const state = { bound: new WeakSet(), pending: {}, timer: null, send: null };
  const flush = () => {
    state.timer = null;
    if (!state.send || Object.keys(state.pending).length === 0) return;
    const changes = state.pending;
    state.pending = {};
    state.send("zoom", changes);
  };
  const onRelayout = (gd, edit) => {
    const key = chartKey(gd);
    const changes = axisChanges(gd, edit);
    if (!key || Object.keys(changes).length === 0) return;
    state.pending[key] = { ...(state.pending[key] || {}), ...changes };
    clearTimeout(state.timer);
    state.timer = setTimeout(flush, QUIET_MS);
  };
  const bind = (event) => {
    const gd = event.target && event.target.closest ? event.target.closest(".js-plotly-plot") : null;
    if (!gd || state.bound.has(gd) || typeof gd.on !== "function") return;
    state.bound.add(gd);
    gd.on("plotly_relayout", (edit) => onRelayout(gd, edit));
  };
  for (const type of ["pointerdown", "mousedown", "touchstart", "wheel", "dblclick"]) {
    document.addEventListener(type, bind, { capture: true, passive: true });
  }
  // A zoom still waiting out the quiet time goes at once when the user turns to a control, so the
  // server has it before the control's own rerun draws the next chart (else that chart would be
  // drawn at full extent and the zoom would come back one change later).
  const flushOnControl = (event) => {
    if (state.timer === null) return;
    const target = event.target;
    if (target && target.closest && target.closest(".js-plotly-plot")) return;
    if (event.type === "keydown" && event.key !== "Enter" && event.key !== "Tab") return;
    clearTimeout(state.timer);
    flush();
  };
  for (const type of ["pointerdown", "keydown", "change"]) {
    document.addEventListener(type, flushOnControl, { capture: true, passive: true });
  }
  state.flush = flush;
  window.__ssgdZoomRelay = state;
  return state;
}

export default function (component) {
  const state = relay();
  state.send = component.setTriggerValue;
  if (state.timer === null) state.flush();  // changes made while no relay was mounted
  return () => {
    if (state.send === component.setTriggerValue) state.send = null;
  };
}
