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
      [/untouched for ([\d.]+) min > ([\d.]+) min/, (m) =>
        `Nothing read it for ${m[1]} minutes, longer than the ${m[2]}-minute limit.`],
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

// The measured inputs as a sentence, or as recorded when no pattern fits.
export function inputsInWords(rule, inputs) {
  for (const [pattern, say] of (RULES[rule] && RULES[rule].inputs) || []) {
    const m = pattern.exec(inputs || "");
    if (m) return say(m);
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
