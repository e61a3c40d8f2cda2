// The item panel: a node (its versions, a checkout), its item in the selected
// commit, and `explain`: every state change with its rule, rules_version,
// event and measured inputs, said in words.

import * as api from "./api.js";
import { badge } from "./commit.js";
import { h, fmt, idLabel, short, when } from "./util.js";
import { ROLES, ruleName, ruleWhy, inputsInWords, reasonInWords, stateWords } from "./words.js";

function versions(ctx, node) {
  if (!node || node.versions < 2) return null;
  const step = (d) => () => {
    const i = (node.version - 1 + d + node.versions) % node.versions;
    ctx.selectNode(node.sibling_ids[i], true);
  };
  return h("div", { class: "versions-bar" },
    h("button", { onclick: step(-1), "aria-label": "previous version" }, "‹"),
    h("span", { "data-testid": "version" }, `version ${node.version} of ${node.versions}`),
    h("button", { onclick: step(1), "aria-label": "next version" }, "›"),
    h("span", { class: "muted" }, node.version_kind ? ` (${node.version_kind})` : " (original)"));
}

function nodeFacts(ctx, node) {
  const facts = [["seq", node.seq], ["recorded", when(node.created_at)]];
  if (node.parent) facts.push([node.edge === "caller" ? "called by" : "after", idLabel(node.parent)]);
  if (node.call_id) facts.push(["call id", node.call_id]);
  for (const join of node.joins || []) {
    facts.push([node.role === "merge" ? "merges" : "attaches",
      `${idLabel(join.node_id)} of “${ctx.sessionTitle(join.session_id) || short(join.session_id)}”`]);
  }
  return h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function itemBlock(ctx, item) {
  if (!item) {
    return h("p", { class: "muted" }, "Not in the selected commit: this node is not on its path.");
  }
  return h("div", { class: "item-now" },
    h("div", {}, badge(item.state), " ", h("span", {}, stateWords(item.state)), " · ",
      h("strong", { "data-testid": "item-tokens" }, fmt(item.tokens)), " tokens"),
    item.attached_from ? h("div", { class: "muted small" },
      `attached from ${ctx.sessionTitle(item.attached_from.split(":")[0]) ||
        item.attached_from}`) : null,  // prettier-ignore
    item.call ? h("pre", { class: "snippet" }, `call: ${item.call}`) : null,
    h("pre", { class: "snippet" }, item.rendered || "(empty)"));
}

function history(ctx, why) {
  if (!why.transitions.length) {
    return h("p", { class: "muted", "data-testid": "explain-empty" },
      "No rule has changed this item: it is as it was recorded.");
  }
  return h("ol", { class: "explain", "data-testid": "explain" }, why.transitions.map((t) =>
    h("li", {},
      h("div", { class: "step-head" }, badge(t.from_state), " → ", badge(t.to_state), " ",
        h("strong", {}, ruleName(t.rule))),
      h("p", {}, `Because ${ruleWhy(t.rule)}. `, h("span", { class: "inputs" },
        inputsInWords(t.rule, t.inputs))),  // prettier-ignore
      h("p", { class: "muted small" }, `Recorded as “${t.inputs}” by rule ${t.rule} ` +
        `(rules ${t.rules_version}), at event #${t.event_seq} (${t.event_id}), in commit `,
        h("a", { href: "#", onclick: (e) => { e.preventDefault(); ctx.selectCommit(t.commit_id); } },
          short(t.commit_id)),  // prettier-ignore
        t.item_id !== why.node_id ? `, as item ${idLabel(t.item_id)}` : "", "."))));
}

function summaryBlock(ctx, item) {
  const covered = ctx.commitItems().filter((i) => i.merged_into === item.item_id);
  return [
    h("p", {}, `${item.reason || "A summary"}: it stands in for ${covered.length} items ` +
      `and costs ${fmt(item.tokens)} tokens.`),
    h("pre", { class: "snippet" }, item.rendered),
    h("h4", {}, "Folded into it"),
    h("ul", { class: "plain" }, covered.map((i) => h("li", {}, h("a", { href: "#",
      onclick: (e) => { e.preventDefault(); ctx.selectItem(i); } }, idLabel(i.item_id)),
      ` · ${ROLES[i.role] || i.role} · ${fmt(i.tokens)} tokens`))),  // prettier-ignore
  ];
}

// ``target``: {nodeId} for a node of the DAG, or {item} for an item without a node.
export async function renderItem(ctx, host, target) {
  host.textContent = "";
  const item = target.item || ctx.commitItems().find((i) => i.source_node_id === target.nodeId &&
    !i.attached_from) || ctx.commitItems().find((i) => i.source_node_id === target.nodeId);
  if (!target.nodeId) {
    host.append(h("h3", {}, `Summary ${short(item.item_id.replace("summary:", ""))}`),
                ...summaryBlock(ctx, item));
    return;
  }
  const node = ctx.dagNode(target.nodeId);
  const title = node ? `${ROLES[node.role] || node.role}${node.name ? ` ${node.name}` : ""}`
                     : "item";  // prettier-ignore
  const isHead = ctx.head() === target.nodeId;
  host.append(...[
    h("h3", { "data-testid": "item-title" }, h("code", { title: target.nodeId },
      idLabel(target.nodeId)), ` · ${title}`,
      isHead ? h("span", { class: "head-tag" }, "HEAD") : null),
    versions(ctx, node),
    node && !isHead && !node.ext ? h("button", { class: "checkout", "data-testid": "checkout",
      onclick: () => ctx.checkout(target.nodeId) }, "Check out here (display only)") : null,
    node ? nodeFacts(ctx, node) : null,
    h("h4", {}, `In commit ${short(ctx.commitId)}`),
    itemBlock(ctx, item)].filter(Boolean));
  const why = await api.get(`/sessions/${ctx.sid}/explain/${encodeURIComponent(target.nodeId)}`);
  if (ctx.shownNode !== target.nodeId) return; // another node was picked meanwhile
  host.append(h("h4", {}, "Why it is in this state"));
  if (why.current) {
    host.append(h("p", { class: "small" }, "At HEAD: ", badge(why.current.state),
      why.current.reason ? ` ${reasonInWords(why.current.reason)}` : "",
      why.current.locked ? " (locked: no rule touches it)" : ""));  // prettier-ignore
  }
  host.append(history(ctx, why));
}
