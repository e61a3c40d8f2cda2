// The occupancy ring and its breakdown, both drawn from ONE occupancy record.
//
// The record's breakdown splits total_used into system, tools and history,
// next to the output reserve and the free space, so the ring's arcs and the
// table's rows are the same numbers and cannot disagree.

import { esc } from "./util.js";

const SVG = "http://www.w3.org/2000/svg";
export const PARTS = [
  ["system", "System prompt", "the system prompt, sent on every call"],
  ["tools", "Tool definitions", "the tools the request lists"],
  ["history", "History", "the conversation: messages, tool calls and results, summaries"],
  ["output_reserve", "Output reserve", "kept free for the model's answer"],
  ["free", "Free", "room left before the reserve"],
];

const fmt = (x) => Number(x).toLocaleString("en-US");
const pct = (x, total) => (total ? ((100 * x) / total).toFixed(1) : "0.0") + "%";

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

export function drawRing(host, occ) {
  host.textContent = "";
  const b = occ.breakdown;
  const window = occ.window;
  const svg = el("svg", { viewBox: "0 0 120 120", class: "ring-svg", "aria-hidden": "true" }, host);
  const r = 48;
  const c = 2 * Math.PI * r;
  el("circle", { cx: 60, cy: 60, r, class: "ring-track" }, svg);
  const total = Math.max(window, b.system + b.tools + b.history + b.output_reserve);
  let at = 0;
  for (const [key] of PARTS) {
    const value = b[key];
    if (!value || key === "free") continue;
    const len = (value / total) * c;
    el("circle", { cx: 60, cy: 60, r, class: `ring-arc part-${key}`,
                   "stroke-dasharray": `${len} ${c - len}`, "stroke-dashoffset": -at,
                   transform: "rotate(-90 60 60)" }, svg);  // prettier-ignore
    at += len;
  }
  const used = el("text", { x: 60, y: 58, class: "ring-big" }, svg);
  used.textContent = pct(occ.total_used, window);
  const small = el("text", { x: 60, y: 74, class: "ring-small" }, svg);
  small.textContent = `${fmt(occ.total_used)} / ${fmt(window)}`;
  const basis = el("text", { x: 60, y: 86, class: "ring-small" }, svg);
  basis.textContent = occ.basis;
}

export function drawBreakdown(host, occ) {
  const b = occ.breakdown;
  const rows = PARTS.map(([key, label, words]) => `
      <tr data-part="${key}">
        <th><span class="swatch part-${key}"></span>${label}</th>
        <td class="num" data-testid="part-${key}">${fmt(b[key])}</td>
        <td class="num muted">${pct(b[key], occ.window)}</td>
        <td class="muted small">${words}</td>
      </tr>`).join("");
  const basis = occ.basis === "measured"
    ? `Measured by the provider (request <code>${esc(occ.request_id)}</code>): ` +
      `${Number(occ.calibration).toFixed(2)}× the local estimate of ${fmt(occ.estimated)} tokens. System and ` +
      "tools are counted locally; history is the rest of the measured total."
    : "Estimated with the local tokenizer; a usage report for this head replaces it with " +
      "the provider's count.";
  const over = b.over
    ? `<p class="warn">The request is ${fmt(b.over)} tokens over the window minus the reserve.</p>`
    : "";
  host.innerHTML = `
    <table class="breakdown-table">
      <tbody>${rows}</tbody>
      <tfoot><tr><th>Used</th><td class="num" data-testid="part-used">${fmt(occ.total_used)}</td>
        <td class="num muted">${pct(occ.total_used, occ.window)}</td>
        <td class="muted small">of a ${fmt(occ.window)}-token window</td></tr></tfoot>
    </table>
    ${over}
    <p class="small">${basis}</p>
    <p class="small muted">History may use ${fmt(b.history_budget)} tokens: compaction starts
      past ${fmt(b.compact_at)}, emergency clearing past ${fmt(b.emergency_at)}.</p>`;
}
