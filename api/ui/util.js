// Small DOM helpers.  Text always goes in as text (never parsed as HTML):
// node content, titles and ids come from whoever wrote the session.

export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function esc(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

export const fmt = (x) => Number(x || 0).toLocaleString("en-US");

export function when(epochSeconds) {
  if (!epochSeconds) return "";
  return new Date(epochSeconds * 1000).toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

export const short = (id) => String(id || "").slice(0, 8);

export function oneLine(text, max) {
  const flat = String(text || "").replace(/\s+/g, " ").trim();
  return flat.length > max ? flat.slice(0, max - 1) + "…" : flat;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// Ids as a person reads them: generated UUIDs shortened, a summary by its own
// short id, an attached copy as its attach's short id and the copied item.
export function idLabel(id) {
  const text = String(id || "");
  if (text.startsWith("summary:")) return `summary ${text.slice(8, 16)}`;
  if (UUID.test(text)) return `${text.slice(0, 8)}…`;
  const colon = text.indexOf(":");
  if (colon > 0 && UUID.test(text.slice(0, colon))) {
    return `${text.slice(0, 8)}…:${idLabel(text.slice(colon + 1))}`;
  }
  return text;
}
