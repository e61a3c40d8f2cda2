// The commit panel: a commit's items with their state badges, what changed
// from its parent commit (and by which rule), and the request it renders to.

import * as api from "./api.js";
import { h, fmt, idLabel, short, oneLine, when } from "./util.js";
import { ROLES, STATES, ruleName, inputsInWords, reasonInWords, stateWords } from "./words.js";

export function badge(state) {
  return h("span", { class: `badge state-${state}`, title: stateWords(state),
                     "data-testid": "badge" }, (STATES[state] || {}).label || state);
}

// The parent to compare with, from this session or, for a branch's first
// commit or a merge peer, from the session it belongs to.
async function loadParent(ctx, commit) {
  const pid = commit.parent_ids[0];
  if (!pid) return null;
  const owners = [commit.session_id];
  if (ctx.session && ctx.session.branched_from) owners.push(ctx.session.branched_from.session_id);
  for (const owner of owners) {
    try {
      return await api.get(`/sessions/${owner}/commits/${pid}`);
    } catch (error) {
      if (error.status !== 404) throw error;
    }
  }
  return null;
}

export async function loadCommit(ctx, cid) {
  const base = `/sessions/${ctx.sid}/commits/${cid}`;
  const [commit, audit] = await Promise.all([api.get(base), api.get(`${base}/transitions`)]);
  const parent = await loadParent(ctx, commit);
  return { commit, transitions: audit.transitions, parent };
}

function attachedFrom(ctx, item) {
  if (!item.attached_from) return null;
  const [sid, head] = item.attached_from.split(":");
  const title = ctx.sessionTitle(sid) || short(sid);
  return h("span", { class: "source", "data-testid": "attached-from" },
    "attached from ", h("a", { href: "#", onclick: (e) => { e.preventDefault();
      ctx.openSession(sid); } }, `“${title}”`), ` at ${head}`);  // prettier-ignore
}

function itemNote(ctx, item) {
  const notes = [];
  if (item.locked) {
    notes.push(h("span", { class: "tag", title: "no rule changes a locked item: it is pinned, " +
      "or part of the block a merge kept as its base had it" }, "locked"));  // prettier-ignore
  }
  if (item.truncated) notes.push(h("span", { class: "tag" }, "cut to the cap"));
  const from = attachedFrom(ctx, item);
  if (from) notes.push(from);
  if (item.state === "summarized" && item.merged_into) {
    notes.push(h("span", { class: "muted" }, `folded into ${idLabel(item.merged_into)}`));
  } else if (item.reason) {
    notes.push(h("span", { class: "muted", title: item.reason }, reasonInWords(item.reason)));
  }
  return notes;
}

function itemsTable(ctx, data) {
  const rows = data.commit.items.map((item) =>
    h("tr", { class: `item-row state-row-${item.state}` +
                     (ctx.selectedItem === item.item_id ? " selected" : ""),
              "data-item": item.item_id, tabindex: 0,
              onclick: () => ctx.selectItem(item) },  // prettier-ignore
      h("td", {}, badge(item.state)),
      h("td", { class: "item-id" }, h("strong", { title: item.item_id }, idLabel(item.item_id)),
        h("div", { class: "muted small" }, (ROLES[item.role] || item.role) +
          (item.name ? ` · ${item.name}` : ""))),  // prettier-ignore
      h("td", { class: "num", "data-testid": "tokens" }, fmt(item.tokens)),
      h("td", { class: "text" }, h("div", { class: "clamp" },
        oneLine(item.call ? `${item.call} → ${item.rendered}` : item.rendered, 240))),
      h("td", { class: "note" }, itemNote(ctx, item))));
  const counts = {};
  for (const item of data.commit.items) counts[item.state] = (counts[item.state] || 0) + 1;
  const summary = Object.keys(STATES).filter((s) => counts[s])
    .map((s) => h("span", { class: "count" }, badge(s), ` ${counts[s]}`));
  return [
    h("div", { class: "counts" }, summary),
    h("table", { class: "items", "data-testid": "items" },
      h("thead", {}, h("tr", {}, h("th", {}, "State"), h("th", {}, "Item"),
        h("th", { class: "num" }, "Tokens"), h("th", {}, "What the model sees"),
        h("th", {}, "Notes"))),  // prettier-ignore
      h("tbody", {}, rows)),
  ];
}

function changes(ctx, data) {
  const { commit, parent, transitions } = data;
  const out = [];
  if (!commit.parent_ids.length) {
    out.push(h("p", {}, "The session's first commit: every item is new."));
  } else if (parent) {
    const delta = commit.total_tokens - parent.total_tokens;
    out.push(h("p", {}, `Compared with the parent commit ${short(parent.id)}` +
      (commit.parent_ids.length > 1 ? ` (the first of ${commit.parent_ids.length}: a merge)` : "") +
      `: ${fmt(parent.total_tokens)} → ${fmt(commit.total_tokens)} tokens ` +
      `(${delta >= 0 ? "+" : "−"}${fmt(Math.abs(delta))}).`));  // prettier-ignore
  } else {
    out.push(h("p", { class: "muted" }, `The parent commit ${short(commit.parent_ids[0])} ` +
      "is not readable from here; the state changes below are this commit's own record."));
  }
  out.push(h("h4", {}, `State changes (${transitions.length})`));
  if (!transitions.length) out.push(h("p", { class: "muted" }, "No rule changed an item's state."));
  out.push(h("ul", { class: "changes", "data-testid": "changes" }, transitions.map((t) =>
    h("li", { class: "change", onclick: () => ctx.selectItemById(t.item_id, t.source_node_id) },
      h("div", {}, h("strong", { title: t.item_id }, idLabel(t.item_id)), " ", badge(t.from_state), " → ",
        badge(t.to_state), " by ", h("span", { class: "rule", "data-testid": "rule" },
          ruleName(t.rule))),  // prettier-ignore
      h("div", { class: "why" }, inputsInWords(t.rule, t.inputs))))));
  if (parent) {
    const before = new Map(parent.items.map((i) => [i.item_id, i]));
    const now = new Set(commit.items.map((i) => i.item_id));
    const added = commit.items.filter((i) => !before.has(i.item_id));
    const gone = parent.items.filter((i) => !now.has(i.item_id));
    out.push(h("h4", {}, `New items (${added.length})`));
    out.push(h("ul", { class: "plain" }, added.map((i) => h("li", {}, badge(i.state), " ",
      h("strong", { title: i.item_id }, idLabel(i.item_id)), ` ${ROLES[i.role] || i.role}, ${fmt(i.tokens)} ` +
      "tokens ", attachedFrom(ctx, i)))));  // prettier-ignore
    if (gone.length) {
      out.push(h("h4", {}, `Not in this commit (${gone.length})`));
      out.push(h("p", { class: "muted small" }, "Items of the parent this head does not see " +
        "(another version was checked out, or the path changed)."));
      out.push(h("ul", { class: "plain" }, gone.map((i) => h("li", {}, idLabel(i.item_id)))));
    }
  }
  return out;
}

async function request(ctx, host) {
  const shapes = ["neutral", "openai", "anthropic"];
  const pre = h("pre", { class: "request", "data-testid": "request" }, "loading…");
  const copy = h("button", { class: "copy", "data-testid": "copy" }, "Copy");
  host.append(h("div", { class: "shape-bar" },
    h("div", { class: "segmented", role: "group", "aria-label": "request shape" },
      shapes.map((s) => h("button", { class: s === ctx.shape ? "on" : "", "data-shape": s,
        onclick: () => { ctx.shape = s; ctx.renderCommit(); } }, s))),  // prettier-ignore
    copy), pre);
  const q = new URLSearchParams({ shape: ctx.shape, commit: ctx.commitId });
  const rendered = await api.get(`/sessions/${ctx.sid}/render?${q}`);
  const text = JSON.stringify(rendered.request, null, 2);
  pre.textContent = text;
  copy.onclick = async () => {
    try {
      await navigator.clipboard.writeText(text);
    } catch (_) {
      const area = h("textarea", {}, text); // no clipboard API (not a secure context)
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    copy.textContent = "Copied";
    setTimeout(() => (copy.textContent = "Copy"), 1500);
  };
}

export function renderCommit(ctx, host, data) {
  host.textContent = "";
  const c = data.commit;
  const head = ctx.nodeRole(c.head_node_id);
  host.append(h("div", { class: "commit-head" },
    h("div", {}, h("strong", {}, `Commit ${short(c.id)}`), h("span", { class: "muted" },
      ` at ${idLabel(c.head_node_id)}${head ? ` (${head})` : ""} · event #${c.event_seq} · ` +
      `${when(c.created_at)} · rules ${c.rules_version}`)),  // prettier-ignore
    h("div", { class: "total" }, h("span", { "data-testid": "commit-total" },
      fmt(c.total_tokens)), " tokens")));  // prettier-ignore
  if (c.summary_request) {
    host.append(h("p", { class: "notice" }, "This commit asks for a summary of " +
      `${c.summary_request.item_ids.length} items (${oneLine(c.summary_request.reason || "", 80)}).`));
  }
  const tabs = [["items", `Items (${c.items.length})`],
                ["changes", `Changes (${data.transitions.length})`], ["request", "Request"]];
  host.append(h("div", { class: "tabs", role: "tablist" }, tabs.map(([key, label]) =>
    h("button", { role: "tab", "aria-selected": String(ctx.tab === key), "data-tab": key,
      class: ctx.tab === key ? "on" : "",
      onclick: () => { ctx.tab = key; ctx.renderCommit(); } }, label))));  // prettier-ignore
  const body = h("div", { class: "tab-body" });
  host.append(body);
  if (ctx.tab === "items") body.append(...itemsTable(ctx, data));
  else if (ctx.tab === "changes") body.append(...changes(ctx, data));
  else request(ctx, body).catch(ctx.fail);
}
