// The transcript of a thread, from /transcript (never from the checkpoint): paged newest
// first with `before_seq`, older pages on scroll-up or `load-older`, at most MAX_ENTRIES
// entries in the DOM (far-away pages are dropped and fetched again when scrolled back to).

import { api, query, threadPath } from "../api.js";
import { fmtInt, fmtTokens, h, plural, textOf, toast } from "../dom.js";

const PAGE = 100;
const MAX_ENTRIES = 300;
const NEWEST = Number.MAX_SAFE_INTEGER; // `before_seq` above every seq: the newest page
const EDGE_PX = 240;
const ARTIFACT_ID = /^art_[0-9a-f]{24}$/;

const ROLES = {
  human: "human",
  user: "human",
  ai: "ai",
  assistant: "ai",
  AIMessageChunk: "ai",
  tool: "tool",
  system: "system",
};
const ROLE_LABEL = { human: "User", ai: "Assistant", tool: "Tool", system: "System" };

function roleOf(message) {
  return ROLES[message && (message.type || message.role)] || "system";
}

function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value ?? {}, null, 2);
}

function toolCallDetails(call) {
  const name = call.name || (call.function && call.function.name) || "tool";
  const args = call.args ?? (call.function && call.function.arguments) ?? {};
  return h(
    "details",
    { class: "tool", testid: "tool-call" },
    h("summary", {}, h("span", { class: "tool-kind" }, "Tool call"), " ", h("code", {}, name)),
    h("pre", { class: "tool-body" }, pretty(args)),
  );
}

function offloadLink(threadId, message) {
  const flag = message.additional_kwargs && message.additional_kwargs.foldwise_offload;
  const id = flag && typeof flag.artifact_id === "string" ? flag.artifact_id : null;
  if (!id || !ARTIFACT_ID.test(id)) return null;
  return h(
    "a",
    {
      class: "offload-link",
      href: `#/t/${encodeURIComponent(threadId)}/artifacts/${id}`,
    },
    `Offloaded in full to ${id} — open`,
  );
}

/** One rendered message (`data-testid=message`). */
export function messageNode(threadId, entry, inContext) {
  const message = entry.message || {};
  const role = roleOf(message);
  const text = textOf(message.content);
  const head = h(
    "div",
    { class: "msg-head" },
    h("span", { class: "who" }, ROLE_LABEL[role]),
    message.name && role !== "human" ? h("code", { class: "name" }, message.name) : null,
  );
  const usage = message.usage_metadata;
  if (role === "ai" && usage && typeof usage.input_tokens === "number") {
    head.append(
      h(
        "span",
        { class: "usage", title: "tokens the model read / wrote for this answer" },
        `${fmtTokens(usage.input_tokens)} in · ${fmtTokens(usage.output_tokens)} out`,
      ),
    );
  }
  if (!inContext) {
    head.append(
      h(
        "span",
        { class: "ctx-flag", title: "folded into the summary: the model no longer sees it verbatim" },
        "not in context",
      ),
    );
  }
  const body = [];
  if (role === "tool") {
    const firstLine = text.split("\n", 1)[0].slice(0, 100);
    body.push(
      h(
        "details",
        { class: "tool", testid: "tool-call" },
        h(
          "summary",
          {},
          h("span", { class: "tool-kind" }, "Tool result"),
          " ",
          h("span", { class: "muted" }, `${fmtInt(text.length)} chars · ${firstLine}`),
        ),
        h("pre", { class: "tool-body" }, text),
      ),
    );
  } else if (text) {
    body.push(h("div", { class: "msg-text" }, text));
  }
  for (const call of message.tool_calls || []) body.push(toolCallDetails(call));
  body.push(offloadLink(threadId, message));
  return h(
    "article",
    {
      class: `msg role-${role}`,
      testid: "message",
      dataset: { seq: String(entry.seq), role, inContext: String(inContext) },
      title: entry.created_at ? new Date(entry.created_at).toLocaleString() : null,
    },
    head,
    body,
  );
}

/** A compaction marker: a button that opens the receipt. */
function markerNode(entry, onOpen) {
  const m = entry.message || {};
  const label = [
    m.manual ? "Compacted manually" : "Compacted automatically",
    `${plural(m.messages_removed, "message")} folded into the summary`,
    `${fmtTokens(m.tokens_before)} → ${fmtTokens(m.tokens_after)} tokens`,
  ].join(" · ");
  return h(
    "div",
    { class: "marker-row", dataset: { seq: String(entry.seq) } },
    h(
      "button",
      {
        type: "button",
        class: "marker",
        testid: "compaction-marker",
        dataset: { receiptId: m.receipt_id || "", seq: String(entry.seq) },
        onclick: (event) => onOpen(entry, event.currentTarget),
      },
      h("span", { class: "marker-icon", "aria-hidden": "true" }, "⤓"),
      h("span", {}, label),
      h("span", { class: "marker-open" }, "Receipt"),
    ),
  );
}

export class Transcript {
  constructor(threadId, { onOpenReceipt, onFirstPaint }) {
    this.threadId = threadId;
    this.onOpenReceipt = onOpenReceipt;
    this.onFirstPaint = onFirstPaint;
    this.entries = [];
    this.hasOlder = false;
    this.hasNewer = false;
    this.busy = false;
    this.legacy = false; // the gateway has no `before_seq` (pages only forward)
    this.painted = false;
    this.older = h(
      "button",
      { type: "button", class: "ghost pager", testid: "load-older", hidden: true, onclick: () => this.loadOlder() },
      "Load older messages",
    );
    this.newer = h(
      "button",
      { type: "button", class: "ghost pager", testid: "load-newer", hidden: true, onclick: () => this.loadNewer() },
      "Load newer messages",
    );
    this.list = h("div", { class: "entries" });
    this.live = h("div", { class: "live" });
    this.empty = h("p", { class: "muted empty", hidden: true }, "No messages yet. Say something below.");
    this.el = h(
      "div",
      { class: "transcript", testid: "transcript", tabindex: "0", "aria-label": "Transcript" },
      this.older,
      this.empty,
      this.list,
      this.newer,
      this.live,
    );
    this.el.addEventListener("scroll", () => this.onScroll(), { passive: true });
  }

  fetch(params) {
    return api(threadPath(this.threadId, `/transcript${query(params)}`));
  }

  node(entry, inContext) {
    return entry.kind === "compaction"
      ? markerNode(entry, this.onOpenReceipt)
      : messageNode(this.threadId, entry, inContext);
  }

  /** Whether each entry is in context: the gateway says so, else "after the last marker". */
  flags(entries) {
    let lastMarker = -1;
    entries.forEach((e, i) => {
      if (e.kind === "compaction") lastMarker = i;
    });
    return entries.map((e, i) =>
      typeof e.in_context === "boolean" ? e.in_context : !(this.legacy && i < lastMarker),
    );
  }

  render(entries) {
    this.entries = entries;
    const flags = this.flags(entries);
    this.list.replaceChildren(...entries.map((e, i) => this.node(e, flags[i])));
    this.updateControls();
  }

  updateControls() {
    this.older.hidden = !this.hasOlder;
    this.newer.hidden = !this.hasNewer;
    this.empty.hidden = this.entries.length > 0 || this.hasOlder;
  }

  firstPaint() {
    if (this.painted) return;
    this.painted = true;
    performance.mark("foldwise:transcript-painted");
    if (this.onFirstPaint) this.onFirstPaint();
  }

  atBottom() {
    return this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < EDGE_PX;
  }

  scrollToBottom() {
    this.el.scrollTop = this.el.scrollHeight;
  }

  /** The newest page, scrolled to the end. */
  async loadLatest() {
    const data = await this.fetch({ before_seq: NEWEST, limit: PAGE });
    if (data.total === undefined && !data.entries.some((e) => "in_context" in e)) {
      return this.loadLegacy(data);
    }
    this.hasOlder = Boolean(data.has_more);
    this.hasNewer = false;
    this.render(data.entries);
    this.firstPaint();
    this.scrollToBottom();
    return data;
  }

  /** A gateway without `before_seq` pages forward only: read to the end, keep the tail. */
  async loadLegacy(first) {
    this.legacy = true;
    let entries = first.entries;
    let data = first;
    let dropped = false;
    while (data.has_more) {
      data = await this.fetch({ after_seq: data.next_after_seq, limit: 1000 });
      entries = entries.concat(data.entries);
      if (entries.length > MAX_ENTRIES) {
        entries = entries.slice(-MAX_ENTRIES);
        dropped = true;
      }
    }
    this.hasOlder = false;
    this.hasNewer = false;
    this.render(entries);
    if (dropped) this.empty.hidden = true;
    this.firstPaint();
    this.scrollToBottom();
    return data;
  }

  /** The page around `seq` (a link from an artifact's origin); the message is highlighted. */
  async loadAround(seq) {
    const data = await this.fetch({ before_seq: seq + PAGE / 2, limit: PAGE });
    this.hasOlder = Boolean(data.has_more);
    const last = data.entries.length ? data.entries[data.entries.length - 1].seq : seq;
    const probe = await this.fetch({ after_seq: last, limit: 1 });
    this.hasNewer = probe.entries.length > 0;
    this.render(data.entries);
    this.firstPaint();
    this.reveal(seq);
  }

  /** Scroll to the entry `seq` (or the nearest after it) and highlight it. */
  reveal(seq) {
    const nodes = [...this.list.children];
    const target = nodes.find((n) => Number(n.dataset.seq) >= seq) || nodes[nodes.length - 1];
    if (!target) return;
    target.classList.add("highlight");
    target.scrollIntoView({ block: "center" });
    setTimeout(() => target.classList.remove("highlight"), 2500);
  }

  async guarded(work) {
    if (this.busy) return;
    this.busy = true;
    try {
      await work();
    } catch (error) {
      toast(`Could not load the transcript: ${error.detail || error.message}`, "error");
    } finally {
      this.busy = false;
    }
  }

  loadOlder() {
    return this.guarded(async () => {
      if (!this.hasOlder || !this.entries.length) return;
      const first = this.entries[0].seq;
      const data = await this.fetch({ before_seq: first, limit: PAGE });
      // Keep the reader's place by the entry that was first: dropping a page at the bottom
      // while adding one at the top leaves the height unchanged, so the height cannot tell.
      const anchor = this.list.firstElementChild;
      const before = anchor ? anchor.getBoundingClientRect().top : 0;
      let entries = data.entries.concat(this.entries);
      this.hasOlder = Boolean(data.has_more);
      if (entries.length > MAX_ENTRIES) {
        entries = entries.slice(0, MAX_ENTRIES);
        this.hasNewer = true;
      }
      this.render(entries);
      const again = [...this.list.children].find((n) => n.dataset.seq === String(first));
      if (again) this.el.scrollTop += again.getBoundingClientRect().top - before;
    });
  }

  loadNewer() {
    return this.guarded(async () => {
      if (!this.hasNewer || !this.entries.length) return;
      const last = this.entries[this.entries.length - 1].seq;
      const data = await this.fetch({ after_seq: last, limit: PAGE });
      let entries = this.entries.concat(data.entries);
      this.hasNewer = Boolean(data.has_more);
      const anchor = this.list.lastElementChild;
      const before = anchor ? anchor.getBoundingClientRect().top : 0;
      if (entries.length > MAX_ENTRIES) {
        entries = entries.slice(entries.length - MAX_ENTRIES);
        this.hasOlder = true;
      }
      this.render(entries);
      const again = [...this.list.children].find((n) => n.dataset.seq === String(last));
      if (again) this.el.scrollTop += again.getBoundingClientRect().top - before;
    });
  }

  /** After a run or a compaction: the newest entries again (new messages, context flags). */
  refreshTail() {
    return this.guarded(async () => {
      if (this.hasNewer) return; // reading older pages: the user jumps to the end when ready
      const limit = Math.min(MAX_ENTRIES, Math.max(PAGE, this.entries.length + 20));
      const data = await this.fetch({ before_seq: NEWEST, limit });
      if (data.total === undefined && !data.entries.some((e) => "in_context" in e)) {
        await this.loadLegacy(data);
        this.live.replaceChildren();
        return;
      }
      this.hasOlder = Boolean(data.has_more);
      this.live.replaceChildren();
      this.render(data.entries);
      this.scrollToBottom();
    });
  }

  onScroll() {
    if (this.busy) return;
    if (this.hasOlder && this.el.scrollTop < EDGE_PX) this.loadOlder();
    else if (this.hasNewer && this.atBottom()) this.loadNewer();
  }
}
