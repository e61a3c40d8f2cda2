// The inspector's page: sessions, the history view, the commit timeline,
// a commit's items and changes, an item's explanation, and the occupancy
// ring, kept live over /sessions/{sid}/stream.

import * as api from "./api.js";
import { loadCommit, renderCommit } from "./commit.js";
import { drawDag } from "./dag.js";
import { renderItem } from "./item.js";
import { drawBreakdown, drawRing } from "./ring.js";
import { h, fmt, idLabel, short, when } from "./util.js";
import { STATES } from "./words.js";

const $ = (id) => document.getElementById(id);
const TIMELINE_PAGE = 300;

const ctx = {
  sessions: [], sid: null, session: null, dag: null, dagView: null, byNode: new Map(),
  timeline: [], occupancy: null, commitId: null, commitData: null, followHead: true,
  tab: "items", shape: "neutral", shownNode: null, selectedItem: null, stopStream: null,
  timelineShown: TIMELINE_PAGE, preview: new Map(),
};

ctx.sessionTitle = (sid) => (ctx.sessions.find((s) => s.session_id === sid) || {}).title;
ctx.nodeRole = (id) => (ctx.byNode.get(id) || {}).role;
ctx.dagNode = (id) => ctx.byNode.get(id);
ctx.head = () => ctx.dag && ctx.dag.head;
ctx.commitItems = () => (ctx.commitData ? ctx.commitData.commit.items : []);

ctx.fail = (error) => {
  const box = $("banner");
  box.hidden = false;
  if (error instanceof api.ApiError && error.status === 401) {
    box.textContent = "This server asks for an API key (401): paste it in the key field above.";
  } else if (error instanceof api.ApiError) {
    box.textContent = `${error.code}: ${error.message}`;
  } else {
    box.textContent = String(error && error.message ? error.message : error);
  }
  console.error(error);
};

function setHash() {
  const params = new URLSearchParams();
  if (ctx.sid) params.set("session", ctx.sid);
  if (ctx.commitId && !ctx.followHead) params.set("commit", ctx.commitId);
  history.replaceState(null, "", `${location.pathname}#${params}`);
}

// ------------------------------------------------------------ sessions

async function loadSessions() {
  ctx.sessions = (await api.get("/sessions")).sessions;
  renderSessions();
}

function renderSessions() {
  const q = $("search").value.trim().toLowerCase();
  const shown = ctx.sessions.filter((s) => !q || (s.title || "").toLowerCase().includes(q))
    .slice().reverse(); // newest first
  $("session-list").replaceChildren(...shown.map((s) =>
    h("li", { class: s.session_id === ctx.sid ? "on" : "" },
      h("a", { href: `#session=${s.session_id}`, "data-session": s.session_id,
        onclick: (e) => { e.preventDefault(); openSession(s.session_id); } },  // prettier-ignore
        h("span", { class: "title" }, s.title || "(untitled)"),
        h("span", { class: "meta" }, `${s.model} · ${when(s.created_at)}`),
        s.branched_from ? h("span", { class: "meta" }, "branch of “" +
          (ctx.sessionTitle(s.branched_from.session_id) || short(s.branched_from.session_id)) +
          `” at ${s.branched_from.node_id}`) : null))));  // prettier-ignore
  $("session-count").textContent = q ? `${shown.length} of ${ctx.sessions.length}`
                                     : `${ctx.sessions.length}`;  // prettier-ignore
}

async function openSession(sid, nodeId) {
  if (ctx.stopStream) ctx.stopStream();
  Object.assign(ctx, { sid, dag: null, timeline: [], occupancy: null, commitId: null,
    commitData: null, followHead: true, shownNode: null, selectedItem: null,
    timelineShown: TIMELINE_PAGE, preview: new Map() });  // prettier-ignore
  const params = api.hashParams();
  const wanted = params.get("session") === sid ? params.get("commit") : null;
  if (!ctx.sessions.some((s) => s.session_id === sid)) await loadSessions();
  ctx.session = ctx.sessions.find((s) => s.session_id === sid) || { session_id: sid };
  renderSessions();
  $("empty").hidden = true;
  $("session").hidden = false;
  $("title").textContent = ctx.session.title || "(untitled)";
  $("subtitle").textContent = `${ctx.session.model || ""} · session ${sid}`;
  for (const id of ["commit", "item", "timeline", "dag"]) $(id).textContent = "";
  $("item").append(h("p", { class: "muted" }, "Click a node or an item to see why it is " +
    "in its state."));  // prettier-ignore
  await loadDag();
  if (wanted) {
    ctx.followHead = false;
    await selectCommit(wanted);
  }
  if (nodeId && ctx.byNode.has(nodeId)) selectNode(nodeId, true);
  ctx.stopStream = api.stream(`/sessions/${sid}/stream`, onFrame, onStreamState);
  setHash();
}

// -------------------------------------------------------------- stream

function onStreamState(state, error) {
  const dot = $("live");
  dot.className = `live ${state}`;
  dot.textContent = { live: "live", retrying: "reconnecting…", stopped: "not live" }[state];
  if (state === "stopped") ctx.fail(error);
}

function onFrame(name, data) {
  if (data.session_id && data.session_id !== ctx.sid) return;
  if (name === "occupancy") {
    ctx.occupancy = data;
    drawRing($("ring-chart"), data);
    drawBreakdown($("breakdown"), data);
    $("ring").setAttribute("data-used", data.total_used);
    if (ctx.dag && data.head_node_id !== ctx.dag.head) loadDag().catch(ctx.fail);
    if (ctx.followHead && data.commit_id && data.commit_id !== ctx.commitId) {
      selectCommit(data.commit_id, true).catch(ctx.fail);
    }
    renderTimeline();
  } else if (name === "timeline") {
    ctx.timeline = data.commits;
    renderTimeline();
  } else if (name === "timeline_append") {
    ctx.timeline.push(...data.commits);
    renderTimeline();
    loadDag().catch(ctx.fail); // new commits come with new nodes
  } else if (name === "error") {
    ctx.fail(new Error(`stream: ${data.code}: ${data.message}`));
  }
}

// ----------------------------------------------------------------- DAG

async function loadDag() {
  const dag = await api.get(`/sessions/${ctx.sid}/dag`);
  if (dag.session_id !== ctx.sid) return;
  ctx.dag = dag;
  ctx.byNode = new Map(dag.nodes.map((n) => [n.node_id, n]));
  $("dag-count").textContent = `${dag.nodes.length} nodes`;
  ctx.dagView = drawDag($("dag"), dag, {
    preview: ctx.preview,
    sessionTitle: ctx.sessionTitle,
    onSelect: (node) => selectNode(node.node_id),
    onOpenSession: (sid, nodeId) => openSession(sid, nodeId),
  });
  highlightDag();
  if (ctx.shownNode) ctx.dagView.select(ctx.shownNode, false);
  ctx.dagView.center(ctx.shownNode || dag.head);
}

function highlightDag() {
  if (!ctx.dagView || !ctx.commitData) return;
  const c = ctx.commitData.commit;
  const nodes = new Set(c.items.filter((i) => !i.attached_from).map((i) => i.source_node_id));
  ctx.dagView.highlight(nodes, c.head_node_id);
}

function selectNode(nodeId, pan) {
  ctx.shownNode = nodeId;
  ctx.selectedItem = null;
  if (ctx.dagView) ctx.dagView.select(nodeId, pan);
  renderItem(ctx, $("item"), { nodeId }).catch(ctx.fail);
}
ctx.selectNode = selectNode;

ctx.selectItem = (item) => {
  ctx.selectedItem = item.item_id;
  for (const row of document.querySelectorAll(".item-row")) {
    row.classList.toggle("selected", row.dataset.item === item.item_id);
  }
  if (item.source_node_id) {
    ctx.shownNode = item.source_node_id;
    if (ctx.dagView) ctx.dagView.select(item.source_node_id, true);
    renderItem(ctx, $("item"), { nodeId: item.source_node_id, item }).catch(ctx.fail);
  } else {
    ctx.shownNode = null;
    renderItem(ctx, $("item"), { item }).catch(ctx.fail);
  }
};

ctx.selectItemById = (itemId, nodeId) => {
  const item = ctx.commitItems().find((i) => i.item_id === itemId);
  if (item) ctx.selectItem(item);
  else if (nodeId) selectNode(nodeId, true);
};

ctx.checkout = async (nodeId) => {
  await api.post(`/sessions/${ctx.sid}/checkout`, { node_id: nodeId }).catch(ctx.fail);
  ctx.followHead = true;
  await loadDag().catch(ctx.fail); // the stream brings the head's occupancy and commit
  selectNode(nodeId, false);
};

ctx.openSession = (sid) => openSession(sid).catch(ctx.fail);

// ------------------------------------------------------------ timeline

function stateBar(counts) {
  const total = Object.values(counts).reduce((a, b) => a + b, 0) || 1;
  return h("span", { class: "state-bar", title: Object.entries(counts).filter(([, v]) => v)
    .map(([k, v]) => `${v} ${k}`).join(", ") },  // prettier-ignore
    Object.keys(STATES).filter((s) => counts[s]).map((s) =>
      h("span", { class: `seg state-${s}`, style: `flex-grow:${counts[s] / total}` })));
}

function renderTimeline() {
  const list = $("timeline");
  const headCommit = ctx.occupancy && ctx.occupancy.commit_id;
  const entries = ctx.timeline.slice(-ctx.timelineShown).reverse();
  $("timeline-count").textContent = `${ctx.timeline.length} commits`;
  list.replaceChildren(...entries.map((c) => {
    const role = ctx.nodeRole(c.head_node_id);
    const changed = Object.entries(c.counts).filter(([k, v]) => v && k !== "full")
      .map(([k, v]) => `${v} ${k}`).join(" · ");  // prettier-ignore
    return h("li", { class: "tl-commit" + (c.commit_id === ctx.commitId ? " on" : ""),
      "data-commit": c.commit_id, tabindex: 0,
      onclick: () => { ctx.followHead = c.commit_id === headCommit;
                       selectCommit(c.commit_id).catch(ctx.fail); } },  // prettier-ignore
      h("div", { class: "line1" },
        h("span", { class: "seq" }, `#${c.event_seq}`),
        h("span", { class: "tl-node" }, idLabel(c.head_node_id), role ? ` · ${role}` : ""),
        c.commit_id === headCommit ? h("span", { class: "head-tag" }, "HEAD") : null,
        h("span", { class: "tok" }, `${fmt(c.total_tokens)} tok`)),
      h("div", { class: "line2" }, stateBar(c.counts),
        h("span", { class: "muted small" }, [
          c.parent_ids.length > 1 ? `merge of ${c.parent_ids.length}` : "",
          changed, c.needs_summary ? "asks for a summary" : ""].filter(Boolean).join(" · "))));
  }));
  const older = ctx.timeline.length - entries.length;
  if (older > 0) {
    list.append(h("li", { class: "more" }, h("button", { onclick: () => {
      ctx.timelineShown += TIMELINE_PAGE; renderTimeline(); } },  // prettier-ignore
      `Show older (${fmt(older)} more)`)));
  }
}

// -------------------------------------------------------------- commit

async function selectCommit(cid, quiet) {
  ctx.commitId = cid;
  const back = ctx.timeline.length - ctx.timeline.findIndex((c) => c.commit_id === cid);
  if (back <= ctx.timeline.length) ctx.timelineShown = Math.max(ctx.timelineShown, back);
  renderTimeline();
  const entry = document.querySelector(`#timeline li[data-commit="${CSS.escape(cid)}"]`);
  const list = $("timeline");
  if (entry) { // scroll the list only, never the page
    const top = entry.offsetTop - list.offsetTop;
    if (top < list.scrollTop || top + entry.offsetHeight > list.scrollTop + list.clientHeight) {
      list.scrollTop = top - list.clientHeight / 3;
    }
  }
  const data = await loadCommit(ctx, cid);
  if (ctx.commitId !== cid) return; // another commit was picked meanwhile
  ctx.commitData = data;
  for (const item of data.commit.items) {
    if (item.source_node_id && !item.attached_from) {
      ctx.preview.set(item.source_node_id, item.rendered);
    }
  }
  if (ctx.dagView && !quiet) ctx.dagView.center(data.commit.head_node_id);
  ctx.renderCommit();
  highlightDag();
  if (ctx.dagView) ctx.dagView.preview(ctx.preview);
  if (ctx.shownNode) renderItem(ctx, $("item"), { nodeId: ctx.shownNode }).catch(ctx.fail);
  setHash();
}
ctx.selectCommit = (cid) => {
  ctx.followHead = ctx.occupancy && cid === ctx.occupancy.commit_id;
  return selectCommit(cid).catch(ctx.fail);
};

ctx.renderCommit = () => {
  if (ctx.commitData) renderCommit(ctx, $("commit"), ctx.commitData);
};

// --------------------------------------------------------------- start

function start() {
  api.takeKeyFromFragment();
  const key = $("key");
  key.value = api.getKey();
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    api.setKey(key.value.trim());
    $("banner").hidden = true;
    loadSessions().then(() => ctx.sid && openSession(ctx.sid)).catch(ctx.fail);
  });
  $("search").addEventListener("input", renderSessions);
  $("banner").addEventListener("click", () => ($("banner").hidden = true));
  $("refresh").addEventListener("click", () => loadSessions().catch(ctx.fail));
  $("ring").addEventListener("click", () => {
    const open = $("breakdown").hidden;
    $("breakdown").hidden = !open;
    $("ring").setAttribute("aria-expanded", String(open));
  });
  $("zoom-in").addEventListener("click", () => ctx.dagView && ctx.dagView.zoomBy(1.25));
  $("zoom-out").addEventListener("click", () => ctx.dagView && ctx.dagView.zoomBy(0.8));
  $("zoom-fit").addEventListener("click", () => ctx.dagView && ctx.dagView.fit());
  $("to-head").addEventListener("click", () => ctx.dagView && ctx.dagView.center(ctx.head()));
  loadSessions()
    .then(() => {
      const sid = api.hashParams().get("session");
      if (sid) return openSession(sid);
      if (ctx.sessions.length === 1) return openSession(ctx.sessions[0].session_id);
      return null;
    })
    .catch(ctx.fail);
}

start();
