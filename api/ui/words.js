// What the codes mean, in words: item states, rules and their measured inputs.
//
// The server records each rule's inputs as a short text such as
// "assistant turns since: 4 > tail 3"; these patterns turn the known ones into
// sentences.  A rule or an input this page does not know is shown as recorded.

export const STATES = {
  full: { label: "full", words: "sent to the model as recorded" },
  aged: { label: "aged", words: "tool result replaced by a one-line stub, arguments shortened" },
  cleared: { label: "cleared", words: "dropped to a placeholder: its content is no longer sent" },
  summarized: { label: "summarized", words: "folded into a summary: not sent on its own" },
  summary: { label: "summary", words: "a summary standing in for earlier items" },
};

export const ROLES = {
  system: "system prompt",
  user: "user",
  assistant: "assistant",
  tool: "tool call",
  attach: "attach",
  merge: "merge",
  summary: "summary",
  marker: "attach marker",
};

import { idLabel } from "./util.js";

const n = (text) => Number(text).toLocaleString("en-US");

export const RULES = {
  tool_aging: {
    name: "Tool aging",
    why: "tool results older than the last few assistant turns are cut to a stub",
    inputs: [
      [/assistant turns since: (\d+) > tail (\d+)/, (m) =>
        `${n(m[1])} assistant turns have passed since this call; ` +
        `only the last ${n(m[2])} keep their tool results in full.`],
    ],
  },
  per_item_cap: {
    name: "Per-item cap",
    why: "a tool result over the size cap is cut in the middle",
    inputs: [
      [/result (\d+) chars > cap (\d+); cut (\d+)/, (m) =>
        `The result was ${n(m[1])} characters, over the ${n(m[2])}-character cap: ` +
        `${n(m[3])} characters were cut from its middle.`],
    ],
  },
  idle_clearing: {
    name: "Idle clearing",
    why: "an aged item nobody read for a long time is cleared",
    inputs: [
      [/untouched for ([\d.]+) min (?:>|≥) ([\d.]+) min/, (m) =>
        `Nothing read it for ${m[1]} minutes, at or past the ${m[2]}-minute limit.`],
    ],
  },
  emergency_clearing: {
    name: "Emergency clearing",
    why: "when the history nears the window's end, every aged item is cleared",
    inputs: [
      [/history (\d+) tokens > emergency (\d+)/, (m) =>
        `The history reached ${n(m[1])} tokens, past the emergency line of ${n(m[2])} tokens.`],
    ],
  },
  summarize: {
    name: "Summarize",
    why: "past the compaction threshold, the oldest run of items is folded into a summary",
    inputs: [
      [/folded into (\S+) by (\S+)/, (m) =>
        `Folded into ${idLabel(m[1])}, written by the ${m[2]} summarizer.`],
    ],
  },
  window_guard: {
    name: "Window guard",
    why: "the request would not fit the window, so this was folded or cut without an LLM",
    inputs: [
      [/folded into (\S+) by (\S+); request (\d+) tokens > limit (\d+)/, (m) =>
        `The request needed ${n(m[3])} tokens, over the limit of ${n(m[4])} (the window ` +
        `minus the room kept for the answer): folded into ${idLabel(m[1])} by the ` +
        `${m[2]} summarizer, which needs no LLM.`],
      [/cleared to fit; request (\d+) tokens > limit (\d+)/, (m) =>
        `The request needed ${n(m[1])} tokens, over the limit of ${n(m[2])}: cleared to fit.`],
    ],
  },
  dedup: {
    name: "Duplicate result",
    why: "a tool result equal to an earlier one still shown is sent as a reference to it",
    inputs: [
      [/result equals (\S+)'s, shown in full; (\d+) tokens saved/, (m) =>
        `The same result as ${idLabel(m[1])}, which is still shown in full: ` +
        `sent as a reference, ${n(m[2])} tokens saved.`],
      [/(\S+) no longer shows this result in full: shown again/, (m) =>
        `${idLabel(m[1])} no longer shows this result in full, so it is shown here again.`],
    ],
  },
  merge: {
    name: "Merge",
    why: "a merged peer held this item in a tighter state, and states only tighten",
    inputs: [
      [/peer commit (\S+) holds it (\w+)/, (m) =>
        `The peer's commit ${m[1].slice(0, 8)} already held this item ${m[2]}.`],
    ],
  },
};

export function ruleName(rule) {
  return (RULES[rule] && RULES[rule].name) || rule;
}

export function ruleWhy(rule) {
  return (RULES[rule] && RULES[rule].why) || `rule "${rule}"`;
}

// Why a batch of waiting aging and clearing ran in this commit (see the README's
// "Cache-aware compaction"): the part of the inputs after "; batch: ".
const BATCHES = [
  [/the prefix changes in this commit anyway/, () =>
    "It had waited for a batch; it ran now because the request changed earlier " +
    "in this commit anyway."],
  [/history (\d+) tokens > compact at (\d+)/, (m) =>
    `It had waited for a batch; it ran now because the history reached ${n(m[1])} ` +
    `tokens, past the compaction threshold of ${n(m[2])}.`],
  [/frees (\d+) tokens >= (\d+), history (\d+) tokens > trigger (\d+)/, (m) =>
    `It had waited for a batch worth a cache miss: together they free ${n(m[1])} tokens ` +
    `(at least ${n(m[2])}), and the history (${n(m[3])} tokens) passed ${n(m[4])}.`],
];

function batchInWords(note) {
  for (const [pattern, say] of BATCHES) {
    const m = pattern.exec(note);
    if (m) return say(m);
  }
  return `Batch: ${note}`;
}

// The measured inputs as a sentence, or as recorded when no pattern fits.
export function inputsInWords(rule, inputs) {
  const [own, batch] = (inputs || "").split("; batch: ");
  for (const [pattern, say] of (RULES[rule] && RULES[rule].inputs) || []) {
    const m = pattern.exec(rule === "window_guard" ? inputs || "" : own);
    if (m) return batch === undefined ? say(m) : `${say(m)} ${batchInWords(batch)}`;
  }
  return inputs ? `Measured: ${inputs}` : "No inputs recorded.";
}

// An item's recorded reason (the inputs of the rule that last changed it) in
// words, whichever rule it came from.
export function reasonInWords(reason) {
  for (const rule of Object.keys(RULES)) {
    const said = inputsInWords(rule, reason);
    if (!said.startsWith("Measured: ")) return said;
  }
  return reason;
}

export function stateWords(state) {
  return (STATES[state] && STATES[state].words) || state;
}
