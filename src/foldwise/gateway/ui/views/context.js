// The context panel: what the next request holds (stacked bar against the window, trigger and
// reserved-output lines), the per-call chart, the exact durable block and the summary diff.

import { ApiError, api, query, threadPath } from "../api.js";
import { fmtInt, fmtPercent, h, mount } from "../dom.js";
import { wordDiff } from "../diff.js";
import { callsChart } from "./chart.js";

const SEGMENTS = [
  ["system", "System prompt", "system"],
  ["tools", "Tool schemas", "tools"],
  ["durable", "Durable block", "durable_context"],
  ["messages", "Messages", "messages"],
];

function pct(value, scale) {
  return `${Math.max(0, Math.min(100, (value / scale) * 100)).toFixed(3)}%`;
}

/** The lowest token limit of the policy's triggers (where the next call compacts). */
function triggerTokens(context, calls) {
  if (calls && typeof calls.trigger_tokens === "number") return calls.trigger_tokens;
  const limits = (context.triggers || []).map((t) => t.limit).filter((v) => typeof v === "number");
  return limits.length ? Math.min(...limits) : null;
}

function bar(context, calls) {
  const tokens = context.tokens || {};
  const used = SEGMENTS.reduce((sum, [, , key]) => sum + (tokens[key] || 0), 0);
  const window = context.window || null;
  const scale = Math.max(window || used * 1.25 || 1, used);
  const segments = SEGMENTS.map(([name, label, key]) => {
    const value = tokens[key] || 0;
    const title = `${label}: ${fmtInt(value)} tokens`;
    const seg = h("div", {
      class: `seg seg-${name}`,
      testid: `context-seg-${name}`,
      title,
      "aria-label": title,
      role: "img",
    });
    seg.style.width = pct(value, scale);
    return seg;
  });
  const trigger = triggerTokens(context, calls);
  const reserved = context.reserved_output_tokens;
  const triggerLine = h("div", {
    class: "mark trigger-mark",
    testid: "context-trigger-line",
    title: trigger ? `compaction trigger at ${fmtInt(trigger)} tokens` : "no token trigger",
    hidden: !trigger,
  }, h("span", {}, "trigger"));
  if (trigger) triggerLine.style.left = pct(trigger, scale);
  const reservedAt = window && typeof reserved === "number" ? window - reserved : null;
  const reservedLine = h("div", {
    class: "mark reserved-mark",
    testid: "context-reserved-line",
    title: reservedAt ? `${fmtInt(reserved)} tokens reserved for the answer (from ${fmtInt(reservedAt)})` : "no reserved output",
    hidden: !reservedAt,
  }, h("span", {}, "reserved"));
  if (reservedAt) reservedLine.style.left = pct(reservedAt, scale);
  const total = typeof tokens.total === "number" ? tokens.total : used;
  const legend = h(
    "ul",
    { class: "legend" },
    SEGMENTS.map(([name, label, key]) =>
      h("li", {}, h("span", { class: `swatch seg-${name}`, "aria-hidden": "true" }), `${label} `, h("strong", {}, fmtInt(tokens[key] || 0))),
    ),
  );
  if (trigger) legend.append(h("li", {}, h("span", { class: "swatch line trigger-swatch", "aria-hidden": "true" }), "Trigger ", h("strong", {}, fmtInt(trigger))));
  if (reservedAt) legend.append(h("li", {}, h("span", { class: "swatch line reserved-swatch", "aria-hidden": "true" }), "Reserved output ", h("strong", {}, fmtInt(reserved))));
  return [
    h("div", { class: "bar-wrap" }, h("div", { class: "bar", testid: "context-bar" }, segments), triggerLine, reservedLine),
    h(
      "p",
      { class: "window-text", testid: "context-window" },
      h("strong", {}, fmtInt(total)),
      window ? ` / ${fmtInt(window)} tokens` : " tokens (window unknown)",
      window ? ` · ${fmtPercent(total / window)} of the window` : "",
    ),
    legend,
  ];
}

function nextCall(context) {
  const next = context.next_call;
  if (!context.compaction_enabled) return h("p", { class: "muted" }, "Compaction is disabled for this agent.");
  if (!next) return null;
  return next.compacts
    ? h("p", { class: "callout warn" }, `The next model call will compact first (${next.trigger}): ${next.reason || ""}`)
    : h("p", { class: "callout" }, `The next model call will not compact${next.skip_reason ? ` (${next.skip_reason.replaceAll("_", " ")})` : ""}.`);
}

/** The compaction marker at `seq` (its `summary` is the text that compaction produced). */
async function markerAt(threadId, seq) {
  const page = await api(threadPath(threadId, `/transcript${query({ before_seq: seq + 1, limit: 1 })}`));
  const entry = page.entries && page.entries[0];
  return entry && entry.kind === "compaction" ? entry.message : null;
}

function words(text) {
  return (text.match(/\S+/g) || []).length;
}

function diffView(previous, current) {
  const out = h("div", { class: "diff", testid: "summary-diff" });
  if (!current) {
    out.append(h("p", { class: "muted" }, "No summary yet: the thread has not been compacted."));
    return out;
  }
  const runs = wordDiff(previous || "", current);
  const added = runs.filter((r) => r.op === "ins").reduce((n, r) => n + words(r.text), 0);
  const removed = runs.filter((r) => r.op === "del").reduce((n, r) => n + words(r.text), 0);
  const stats = h("p", { class: "diff-stats" }, h("ins", {}, `+${added}`), " words, ", h("del", {}, `−${removed}`), " words");
  for (const run of runs) {
    if (run.op === "ins") out.append(h("ins", {}, run.text));
    else if (run.op === "del") out.append(h("del", {}, run.text));
    else out.append(document.createTextNode(run.text));
  }
  return [stats, out];
}

export class ContextPanel {
  constructor(threadId) {
    this.threadId = threadId;
    this.stale = true;
    this.el = h("section", { class: "context-panel", "aria-label": "Context" }, h("p", { class: "muted" }, "Loading…"));
  }

  markStale() {
    this.stale = true;
  }

  async load() {
    this.stale = false;
    const path = (rest) => threadPath(this.threadId, rest);
    try {
      const [context, calls] = await Promise.all([
        api(path("/context")),
        api(path(`/calls${query({ limit: 500 })}`)).catch((error) => {
          if (error instanceof ApiError && error.status === 404 && !/thread/.test(error.detail)) return null;
          throw error;
        }),
      ]);
      await this.render(context, calls);
    } catch (error) {
      mount(this.el, h("p", { class: "notice" }, `Could not read the context: ${error.detail || error.message}`));
    }
  }

  async summaries(context, calls) {
    const markers = calls && calls.compactions ? calls.compactions.slice(-2).reverse() : [];
    const found = [];
    for (const c of markers) {
      const marker = await markerAt(this.threadId, c.seq);
      found.push(marker && typeof marker.summary === "string" ? marker.summary : null);
    }
    const current = typeof context.summary_text === "string" ? context.summary_text : found[0] ?? null;
    const previous = found[0] != null && found[0] !== current ? found[0] : found[1] ?? null;
    return { current, previous, count: markers.length };
  }

  async render(context, calls) {
    const durable = context.durable || null;
    const { current, previous, count } = await this.summaries(context, calls);
    const model = context.model_name ? ` · model ${context.model_name}` : "";
    const chartWrap = h("div", { class: "chart-wrap" });
    mount(
      this.el,
      h(
        "div",
        { class: "card" },
        h("h2", {}, "Next request"),
        h("p", { class: "muted small" }, `What the model would receive now, counted with ${context.counter || "the agent's counter"}${model}. ${fmtInt(context.message_count)} messages in context.`),
        bar(context, calls),
        nextCall(context),
      ),
      h(
        "div",
        { class: "card" },
        h("h2", {}, "Model calls"),
        calls
          ? [
              h("p", { class: "muted small" }, `Input tokens of the last ${fmtInt(calls.calls.length)} calls; ▼ marks a compaction (tokens after), the dashed line is the trigger.`),
              chartWrap,
            ]
          : h("p", { class: "muted" }, "This gateway does not report per-call history."),
      ),
      h(
        "div",
        { class: "card" },
        h("h2", {}, "Durable block"),
        h("p", { class: "muted small" }, "The data message the model receives with every call, exactly as rendered: summary, delegations, skills, artifacts, the memory profile."),
        h("pre", { class: "block", testid: "durable-text" }, durable && durable.data ? durable.data : ""),
        durable && durable.data ? null : h("p", { class: "muted" }, durable ? "Empty: nothing durable to carry yet." : "This gateway does not report the durable block text."),
        durable && durable.recall
          ? h(
              "div",
              { testid: "durable-recall" },
              h("h3", {}, "Recalled memory"),
              h("p", { class: "muted small" }, "Facts recalled for the latest user message, in their own data message right after it."),
              h("pre", { class: "block" }, durable.recall),
            )
          : null,
        durable && durable.contract
          ? h("details", { class: "contract" }, h("summary", {}, "Authority contract (system part)"), h("pre", { class: "block" }, durable.contract))
          : null,
      ),
      h(
        "div",
        { class: "card" },
        h("h2", {}, "Summary"),
        h("pre", { class: "block summary", testid: "summary-text" }, current || ""),
        current ? null : h("p", { class: "muted" }, "No summary yet."),
        h("h3", {}, previous ? "Changes since the previous compaction" : count > 0 ? "First summary (all new)" : "Changes"),
        diffView(previous, current),
      ),
    );
    // Drawn once its box is laid out, at that width (the SVG keeps its text size).
    if (calls) chartWrap.append(callsChart(calls, chartWrap.clientWidth || 640));
  }
}
