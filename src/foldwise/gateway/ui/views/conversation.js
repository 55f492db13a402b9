// The conversation: the transcript, the composer (messages and /compact), streamed answers.

import { api, streamRun, threadPath } from "../api.js";
import { fmtInt, fmtTokens, h, plural, textOf, toast } from "../dom.js";
import { openReceipt } from "./receipt.js";
import { Transcript } from "./transcript.js";

const COMPACT = /^\/compact(?:\s+keep=(\d+))?\s*$/;

const SKIP_REASONS = {
  not_enough_messages: "there are not enough messages to fold yet",
  below_threshold: "the context is below the trigger",
  everything_rescued: "every message that could be folded must be kept verbatim",
  gain_below_minimum: "folding would save too few tokens to be worth it",
};

/** A failed call explained in plain words (the gateway's detail follows in small print). */
export function explain(error, action) {
  const detail = error.detail || error.message || "";
  switch (error.status) {
    case 409:
      return /disabled/i.test(detail)
        ? "Compaction is disabled for this agent, so /compact cannot run."
        : "A run is in progress on this thread — wait for it to finish, then try again.";
    case 502:
      return action === "compact"
        ? "The summarizer model failed; nothing was changed."
        : "The model server failed to answer; nothing was changed.";
    case 503:
      return "The gateway is stopping or its storage is unavailable; try again in a moment.";
    case 404:
      return "This thread no longer exists (or is not yours).";
    case 413:
      return "The message is too large for this gateway.";
    case 422:
      return "The gateway refused the request.";
    default:
      return error.status ? `The request failed (HTTP ${error.status}).` : "The gateway could not be reached.";
  }
}

export class Conversation {
  constructor(threadId, { assistantId, onRunFinished }) {
    this.threadId = threadId;
    this.assistantId = assistantId || "agent";
    this.onRunFinished = onRunFinished || (() => {});
    this.running = false;
    this.transcript = new Transcript(threadId, {
      onOpenReceipt: (entry) => openReceipt(threadId, entry),
    });
    this.input = h("textarea", {
      class: "composer-input",
      testid: "composer-input",
      rows: "2",
      placeholder: "Message the agent — or /compact, /compact keep=8",
      "aria-label": "Message",
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.submit();
      }
    });
    this.input.addEventListener("input", () => this.grow());
    this.sendButton = h(
      "button",
      { type: "submit", class: "primary", testid: "composer-send" },
      "Send",
    );
    this.notice = h("div", { class: "composer-notice", testid: "composer-notice", role: "alert", hidden: true });
    const form = h(
      "form",
      { class: "composer", "aria-label": "Composer" },
      this.notice,
      h("div", { class: "composer-row" }, this.input, this.sendButton),
      h("p", { class: "hint" }, "Enter sends · Shift+Enter for a new line · /compact or /compact keep=N folds the history now"),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    this.el = h("section", { class: "conversation", "aria-label": "Conversation" }, this.transcript.el, form);
  }

  /** Load the newest page, or the page around `seq`. */
  async open(seq) {
    try {
      if (seq) await this.transcript.loadAround(seq);
      else await this.transcript.loadLatest();
    } catch (error) {
      this.showNotice(`Could not load the transcript. ${explain(error)}`, error.detail);
    }
  }

  grow() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight + 2, 240)}px`;
  }

  showNotice(text, detail, kind = "error") {
    this.notice.replaceChildren(h("strong", {}, text));
    if (detail) this.notice.append(" ", h("span", { class: "detail" }, detail));
    this.notice.dataset.kind = kind;
    this.notice.hidden = false;
  }

  clearNotice() {
    this.notice.hidden = true;
    this.notice.replaceChildren();
  }

  async submit() {
    const text = this.input.value.trim();
    if (!text || this.running) return;
    if (text.startsWith("/compact")) {
      const match = COMPACT.exec(text);
      const keep = match && match[1] !== undefined ? Number(match[1]) : null;
      if (!match || (keep !== null && keep < 1)) {
        this.showNotice("Usage: /compact, or /compact keep=N to keep the last N (1 or more) messages verbatim.");
        return;
      }
      this.input.value = "";
      this.grow();
      await this.compact(keep);
      return;
    }
    this.input.value = "";
    this.grow();
    await this.run(text);
  }

  setRunning(running) {
    this.running = running;
    this.sendButton.disabled = running;
    this.sendButton.textContent = running ? "Working…" : "Send";
  }

  async finish() {
    await this.transcript.refreshTail();
    this.onRunFinished();
  }

  async compact(keep) {
    this.clearNotice();
    this.setRunning(true);
    try {
      const body = keep === null ? {} : { keep: { type: "messages", value: keep } };
      const result = await api(threadPath(this.threadId, "/compact"), { method: "POST", body });
      if (result.compacted) {
        toast(
          `Compacted: ${plural(result.removed_message_count, "message")} folded, ` +
            `${fmtTokens(result.tokens_before)} → ${fmtTokens(result.tokens_after)} tokens`,
        );
      } else {
        const why = SKIP_REASONS[result.reason] || result.reason || "nothing to do";
        this.showNotice(`Nothing was compacted: ${why}.`, result.detail, "info");
      }
    } catch (error) {
      this.showNotice(explain(error, "compact"), error.detail);
    } finally {
      this.setRunning(false);
      await this.finish();
    }
  }

  streamingNode() {
    const body = h("div", { class: "msg-text" });
    const node = h(
      "article",
      { class: "msg role-ai streaming", testid: "streaming", "aria-busy": "true", dataset: { role: "ai" } },
      h("div", { class: "msg-head" }, h("span", { class: "who" }, "Assistant"), h("span", { class: "typing" }, "writing…")),
      body,
    );
    return { node, body };
  }

  async run(text) {
    this.clearNotice();
    this.setRunning(true);
    const t = this.transcript;
    t.empty.hidden = true;
    t.live.append(
      h(
        "article",
        { class: "msg role-human pending", testid: "message", dataset: { seq: "", role: "human", inContext: "true" } },
        h("div", { class: "msg-head" }, h("span", { class: "who" }, "User"), h("span", { class: "typing" }, "sending…")),
        h("div", { class: "msg-text" }, text),
      ),
    );
    const { node, body } = this.streamingNode();
    t.live.append(node);
    t.scrollToBottom();
    const parts = new Map(); // message id -> its text node in the streaming element
    const onEvent = ({ event, data }) => {
      const follow = t.atBottom();
      if (event === "messages" && Array.isArray(data)) this.onChunk(data[0] || {}, body, parts);
      else if (event === "error") {
        const message = (data && (data.message || data.error)) || "the run failed";
        this.showNotice("The run failed.", String(message));
      }
      if (follow) t.scrollToBottom();
    };
    try {
      await streamRun(
        this.threadId,
        {
          assistant_id: this.assistantId,
          input: { messages: [{ type: "human", content: text }] },
          stream_mode: ["messages-tuple", "values"],
          on_disconnect: "continue",
        },
        onEvent,
      );
    } catch (error) {
      this.showNotice(explain(error, "run"), error.detail || error.message);
      if (error.status === 409 || error.status === 422) this.input.value = text;
    } finally {
      this.setRunning(false);
      await this.finish();
    }
  }

  onChunk(chunk, body, parts) {
    const type = chunk.type || "";
    if (type === "human" || type === "HumanMessageChunk") return;
    const id = chunk.id || "?";
    if (type === "tool" || type === "ToolMessageChunk") {
      const text = textOf(chunk.content);
      body.append(h("p", { class: "stream-tool" }, `Tool ${chunk.name || ""} answered (${fmtInt(text.length)} chars)`));
      return;
    }
    let part = parts.get(id);
    if (!part) {
      part = { text: document.createTextNode(""), tools: h("span", { class: "stream-tool" }) };
      parts.set(id, part);
      body.append(h("div", {}, part.text, part.tools));
    }
    part.text.appendData(textOf(chunk.content));
    const names = (chunk.tool_call_chunks || chunk.tool_calls || []).map((c) => c.name).filter(Boolean);
    if (names.length) part.tools.textContent = ` calling ${names.join(", ")}…`;
  }
}
