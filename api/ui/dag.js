// The history view: every node of a session as an SVG graph, one row per node.
//
// Rows follow seq.  A "chain" follows one child at a time (the one on the way
// to HEAD first) and keeps its lane; every other child starts a chain in the
// lowest lane that is free over the rows the chain spans, so branches, retries
// and a tool call's results fan out to the right of the turn that made them.
// Heads brought in from elsewhere (a merge peer, an attach source, the node a
// branch grew from) are drawn as dashed stand-ins that open their session.

const SVG = "http://www.w3.org/2000/svg";
const ROW = 28;
const LANE = 22;
const PAD = 18;

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

export function layout(dag, headPath) {
  const real = [...dag.nodes].sort((a, b) => a.seq - b.seq);
  const known = new Set(real.map((x) => x.node_id));
  const rows = [];
  const stand = new Map(); // stand-in id -> stand-in
  const standIn = (id, sessionId, nodeId, kind) => {
    if (!stand.has(id)) {
      const s = { node_id: id, ext: true, kind, session_id: sessionId, target: nodeId,
                  role: "external", versions: 1, version: 1, joins: [] };
      stand.set(id, s);
      rows.push(s);
    }
    return stand.get(id);
  };
  const parentOf = new Map();
  const joinEdges = [];
  for (const node of real) {
    if (node.parent && !known.has(node.parent)) {
      const from = dag.branched_from || {};
      standIn(`ext:${node.parent}`, from.session_id, node.parent, "branch");
      parentOf.set(node.node_id, `ext:${node.parent}`);
    } else if (node.parent) {
      parentOf.set(node.node_id, node.parent);
    }
    (node.joins || []).forEach((join, i) => {
      let from = join.node_id;
      if (join.session_id !== dag.session_id || !known.has(join.node_id)) {
        from = standIn(`join:${node.node_id}:${i}`, join.session_id, join.node_id, node.role)
          .node_id;
      }
      joinEdges.push({ from, to: node.node_id, kind: node.role });
    });
    rows.push(node);
  }
  const byId = new Map(rows.map((x, i) => [x.node_id, Object.assign(x, { row: i })]));
  const children = new Map();
  for (const node of rows) {
    const p = parentOf.get(node.node_id);
    if (p) (children.get(p) || children.set(p, []).get(p)).push(node);
  }
  const onPath = new Set(headPath);
  const next = (node) => {
    const kids = children.get(node.node_id) || [];
    return kids.find((k) => onPath.has(k.node_id)) ||
      kids.find((k) => k.edge !== "caller") || kids[0];
  };
  // Chains, each spanning [the row its first edge leaves, its last row].
  const chains = [];
  const chainOf = new Map();
  for (const node of rows) {
    if (chainOf.has(node.node_id)) continue;
    const members = [];
    for (let x = node; x && !chainOf.has(x.node_id); x = next(x)) {
      members.push(x);
      chainOf.set(x.node_id, members);
    }
    const p = parentOf.get(node.node_id);
    let end = members[members.length - 1].row;
    for (const edge of joinEdges) {
      if (members.some((m) => m.node_id === edge.from) && byId.get(edge.to).row > end) {
        end = byId.get(edge.to).row; // a stand-in keeps its lane down to its merge
      }
    }
    chains.push({ members, start: p ? byId.get(p).row : node.row, end });
  }
  // Chains come in order of their first row, so a lane is free for the next
  // one exactly when the last chain placed in it ended above that row.
  const laneEnd = [];
  for (const chain of chains.sort((a, b) => a.start - b.start || a.end - b.end)) {
    let lane = 0;
    while (lane < laneEnd.length && laneEnd[lane] >= chain.start) lane++;
    laneEnd[lane] = chain.end;
    for (const m of chain.members) m.lane = lane;
  }
  const lanes = Math.max(1, laneEnd.length);
  for (const node of rows) {
    node.x = PAD + node.lane * LANE;
    node.y = PAD + node.row * ROW;
  }
  const edges = rows
    .filter((x) => parentOf.has(x.node_id))
    .map((x) => ({ from: byId.get(parentOf.get(x.node_id)), to: x, kind: "parent" }));
  for (const j of joinEdges) edges.push({ from: byId.get(j.from), to: byId.get(j.to), kind: j.kind });
  return { rows, byId, edges, labelX: PAD + lanes * LANE + 6,
           height: PAD * 2 + rows.length * ROW };
}

// The node ids from the root down to ``head``.
export function pathTo(dag, head) {
  const parent = new Map(dag.nodes.map((x) => [x.node_id, x.parent]));
  const path = [];
  for (let id = head; id && parent.has(id); id = parent.get(id)) path.push(id);
  return path;
}

function shape(node, g) {
  const { x, y } = node;
  const r = 7;
  switch (node.role) {
    case "system":
      return el("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r, rx: 2 }, g);
    case "user":
      return el("circle", { cx: x, cy: y, r }, g);
    case "assistant":
      return el("path", { d: `M${x},${y - r - 1} L${x + r + 1},${y} L${x},${y + r + 1} ` +
                             `L${x - r - 1},${y} Z` }, g);
    case "tool":
      return el("path", { d: `M${x},${y - r} L${x + r},${y + r - 1} L${x - r},${y + r - 1} Z` }, g);
    case "merge": {
      const c = el("circle", { cx: x, cy: y, r: r + 2 }, g);
      el("path", { d: `M${x - 4},${y} H${x + 4} M${x},${y - 4} V${y + 4}`, class: "glyph" }, g);
      return c;
    }
    case "attach":
      return el("path", { d: `M${x - r},${y - r} H${x + r} V${y + r} H${x - r} Z ` +
                             `M${x - r},${y} H${x + r}` }, g);
    default: // a stand-in for a node elsewhere
      return el("circle", { cx: x, cy: y, r, class: "ext-shape" }, g);
  }
}

function edgePath(a, b) {
  if (a.x === b.x) return `M${a.x},${a.y} V${b.y}`;
  const bend = a.y + ROW * 0.9;
  return `M${a.x},${a.y} C${a.x},${bend} ${b.x},${a.y + ROW * 0.2} ${b.x},${Math.min(bend, b.y)}` +
    (b.y > bend ? ` V${b.y}` : "");
}

function shorten(text, max) {
  const flat = (text || "").replace(/\s+/g, " ").trim();
  return flat.length > max ? flat.slice(0, max - 1) + "…" : flat;
}

// Draws into ``host``; returns {select, highlight, zoomBy, fit, center, destroy}.
// ``opts``: preview (Map node id -> text),
// sessionTitle(id), onSelect(node), onOpenSession(sessionId).
export function drawDag(host, dag, opts) {
  host.textContent = "";
  const headPath = pathTo(dag, dag.head);
  const lay = layout(dag, headPath);
  const svg = el("svg", { class: "dag-svg", role: "img", "aria-label": "history of the session" },
                 host);
  const view = el("g", {}, svg);
  const edgeLayer = el("g", { class: "edges" }, view);
  const nodeLayer = el("g", { class: "nodes" }, view);
  for (const e of lay.edges) {
    el("path", { d: edgePath(e.from, e.to), class: `edge edge-${e.kind}` }, edgeLayer);
  }
  const groups = new Map();
  const previews = new Map();
  for (const node of lay.rows) {
    const g = el("g", { class: `node role-${node.role}`, "data-node": node.node_id,
                        tabindex: 0 }, nodeLayer);  // prettier-ignore
    el("rect", { x: 4, y: node.y - ROW / 2 + 1, width: lay.labelX + 560, height: ROW - 2,
                 class: "row-hit", rx: 4 }, g);  // prettier-ignore
    shape(node, g).classList.add("shape");
    const label = el("text", { x: lay.labelX, y: node.y + 4, class: "label" }, g);
    if (node.ext) {
      const title = opts.sessionTitle(node.session_id) || (node.session_id || "").slice(0, 8);
      const verb = { branch: "branched from", merge: "merges", attach: "attaches" };
      el("tspan", { class: "ext-label" }, label).textContent =
        `${verb[node.kind] || "from"} ${shorten(node.target, 14)} of “${shorten(title, 40)}” ↗`;
    } else {
      el("tspan", { class: "id" }, label).textContent = shorten(node.node_id, 14);
      el("tspan", { class: "role", dx: 6 }, label).textContent =
        node.role + (node.name ? ` ${node.name}` : "");
      if (node.versions > 1) {
        const v = el("tspan", { class: "versions", dx: 8 }, label);
        el("tspan", { class: "step", "data-step": -1 }, v).textContent = "‹";
        el("tspan", { dx: 3 }, v).textContent = `${node.version}/${node.versions}`;
        el("tspan", { class: "step", "data-step": 1, dx: 3 }, v).textContent = "›";
      }
      if (node.node_id === dag.head) el("tspan", { class: "head-tag", dx: 8 }, label)
        .textContent = "HEAD";
      previews.set(node.node_id, el("tspan", { class: "preview", dx: 10 }, label));
    }
    groups.set(node.node_id, g);
    g.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        g.dispatchEvent(new MouseEvent("click", { bubbles: true }));
      }
    });
    g.addEventListener("click", (event) => {
      const step = event.target.getAttribute && event.target.getAttribute("data-step");
      if (step && !node.ext) {
        const i = node.version - 1 + Number(step);
        const id = node.sibling_ids[(i + node.versions) % node.versions];
        ctl.select(id, true);
        opts.onSelect(lay.byId.get(id));
        return;
      }
      if (node.ext) opts.onOpenSession(node.session_id, node.target);
      else opts.onSelect(node);
    });
  }

  // Zoom and pan: a transform on one group, wheel zooms around the pointer.
  const state = { s: 1, tx: 0, ty: 0 };
  const apply = () => view.setAttribute("transform",
    `translate(${state.tx},${state.ty}) scale(${state.s})`);
  const zoomAt = (factor, px, py) => {
    const s = Math.min(3, Math.max(0.2, state.s * factor));
    state.tx = px - (px - state.tx) * (s / state.s);
    state.ty = py - (py - state.ty) * (s / state.s);
    state.s = s;
    apply();
  };
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    const box = svg.getBoundingClientRect();
    zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - box.left, event.clientY - box.top);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (event) => {
    drag = { x: event.clientX, y: event.clientY, tx: state.tx, ty: state.ty, moved: false };
  });
  svg.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const dx = event.clientX - drag.x;
    const dy = event.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    drag.moved = true;
    svg.setPointerCapture(event.pointerId);
    state.tx = drag.tx + dx;
    state.ty = drag.ty + dy;
    apply();
  });
  const endDrag = (event) => {
    if (drag && drag.moved) {
      svg.releasePointerCapture(event.pointerId);
      svg.addEventListener("click", (e) => e.stopPropagation(), { capture: true, once: true });
    }
    drag = null;
  };
  svg.addEventListener("pointerup", endDrag);
  svg.addEventListener("pointercancel", endDrag);

  const ctl = {
    layout: lay,
    select(id, pan) {
      for (const g of groups.values()) g.classList.remove("selected");
      const g = groups.get(id);
      if (g) g.classList.add("selected");
      if (pan) ctl.center(id);
    },
    highlight(inCommit, commitHead) {
      const path = new Set(pathTo(dag, commitHead));
      for (const [id, g] of groups) {
        const node = lay.byId.get(id);
        g.classList.toggle("dim", !node.ext && !inCommit.has(id) && !path.has(id));
        g.classList.toggle("heads-commit", id === commitHead);
      }
    },
    preview(texts) {
      for (const [id, tspan] of previews) tspan.textContent = shorten(texts.get(id), 64);
    },
    zoomBy(factor) {
      const box = svg.getBoundingClientRect();
      zoomAt(factor, box.width / 2, box.height / 2);
    },
    fit() {
      const box = svg.getBoundingClientRect();
      state.s = Math.min(1, Math.max(0.2, box.height / lay.height));
      state.tx = 0;
      state.ty = 0;
      apply();
    },
    center(id) {
      const node = lay.byId.get(id);
      if (!node) return;
      const box = svg.getBoundingClientRect();
      // Middle of the view, but never past the graph's ends when it is taller.
      const lowest = box.height - lay.height * state.s;
      state.ty = Math.min(0, Math.max(lowest, box.height / 2 - node.y * state.s));
      state.tx = Math.min(0, box.width / 3 - node.x * state.s);
      apply();
    },
  };
  ctl.highlight(new Set(lay.rows.map((x) => x.node_id)), null);
  ctl.preview(opts.preview);
  apply();
  return ctl;
}
