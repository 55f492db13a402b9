// One thread's pane: its heading, the tabs (conversation, context, artifacts) and their views.

import { api, threadPath } from "../api.js";
import { h, textOf } from "../dom.js";
import { Artifacts } from "./artifacts.js";
import { ContextPanel } from "./context.js";
import { Conversation } from "./conversation.js";
import { threadLabel } from "./threads.js";

const BUSY_POLL_MS = 2500;
const IDLE_POLL_MS = 10000;

const TABS = [
  ["conversation", "Conversation", ""],
  ["context", "Context", "/context"],
  ["artifacts", "Artifacts", "/artifacts"],
];

export class ThreadPane {
  constructor(threadId, { listed, onRunFinished }) {
    this.headed = false;
    this.activity = null; // updated_at, message and compaction counts last seen
    this.ownChange = false;
    this.watchTimer = 0;
    this.threadId = threadId;
    this.opened = false;
    this.seq = null;
    this.context = new ContextPanel(threadId);
    this.artifacts = new Artifacts(threadId);
    this.conversation = new Conversation(threadId, {
      assistantId: listed && listed.metadata && listed.metadata.assistant_id,
      onRunFinished: () => {
        this.ownChange = true; // the transcript is already fresh
        this.context.markStale();
        this.artifacts.artifacts = null;
        this.refreshHeading();
        if (this.tab === "context") this.context.load();
        else if (this.tab === "artifacts") this.artifacts.show(this.artifacts.current && this.artifacts.current.id);
        onRunFinished();
      },
    });
    this.title = h("h1", { class: "pane-title thread-heading", tabindex: "-1" }, threadLabel(listed || { thread_id: threadId }));
    this.status = h("span", { class: "status", hidden: true });
    const base = `#/t/${encodeURIComponent(threadId)}`;
    this.tabs = TABS.map(([name, label, suffix]) =>
      h("a", { class: "tab", href: base + suffix, testid: `tab-${name}`, dataset: { tab: name } }, label),
    );
    this.views = {
      conversation: this.conversation.el,
      context: this.context.el,
      artifacts: this.artifacts.el,
    };
    this.missing = h("p", { class: "notice", hidden: true });
    this.el = h(
      "section",
      { class: "thread-pane" },
      h(
        "div",
        { class: "pane-head" },
        h("a", { class: "back-link phone-only", href: "#/", testid: "nav-back" }, "← Threads"),
        h("div", { class: "heading-row" }, this.title, this.status),
        h("nav", { class: "tabs", "aria-label": "Thread views" }, this.tabs),
      ),
      this.missing,
      h("div", { class: "pane-body" }, Object.values(this.views)),
    );
  }

  /** Heading, status and assistant from a listed record (`/threads/overview`). */
  update(record) {
    if (!record || record.thread_id !== this.threadId) return;
    const assistant = record.metadata && record.metadata.assistant_id;
    if (assistant) this.conversation.assistantId = assistant;
    this.title.textContent = threadLabel(record);
    this.status.textContent = record.status;
    this.status.className = `status status-${record.status}`;
    this.status.hidden = false;
    // Activity from elsewhere (another tab, an SDK client): show what it wrote.
    const activity = `${record.updated_at}|${record.message_count}|${record.compaction_count}`;
    const changed = this.activity !== null && activity !== this.activity;
    this.activity = activity;
    if (changed && !this.conversation.running && !this.ownChange) this.changedElsewhere();
    this.ownChange = false;
    clearTimeout(this.watchTimer);
    this.watchTimer = setTimeout(
      () => this.poll(),
      record.status === "busy" ? BUSY_POLL_MS : IDLE_POLL_MS,
    );
  }

  changedElsewhere() {
    this.context.markStale();
    this.artifacts.artifacts = null;
    if (this.opened) this.conversation.transcript.refreshTail();
    if (this.tab === "context") this.context.load();
  }

  poll() {
    if (!this.el.isConnected) return; // another thread is shown: this pane is gone
    if (document.visibilityState !== "visible") {
      this.watchTimer = setTimeout(() => this.poll(), IDLE_POLL_MS);
      return;
    }
    this.refreshHeading();
  }

  async refreshHeading() {
    try {
      let record = null;
      try {
        const page = await api("/threads/overview", { method: "POST", body: { limit: 1, thread_id: this.threadId } });
        record = page.threads.find((t) => t.thread_id === this.threadId) || null;
      } catch (error) {
        if (error.status !== 404 && error.status !== 405) throw error;
        const thread = await api(threadPath(this.threadId)); // a gateway without the overview
        const first = ((thread.values && thread.values.messages) || []).find((m) => m && m.type === "human");
        record = { ...thread, title: first ? textOf(first.content).slice(0, 120) : "" };
      }
      if (record) this.update(record);
      else this.showMissing();
    } catch (error) {
      if (error.status === 404) this.showMissing();
    }
  }

  showMissing() {
    this.missing.textContent = `Thread ${this.threadId} was not found (deleted, or not yours).`;
    this.missing.hidden = false;
  }

  /** Show the tab named by the route. */
  async show(route) {
    this.tab = route.tab;
    for (const tab of this.tabs) {
      if (tab.dataset.tab === route.tab) tab.setAttribute("aria-current", "page");
      else tab.removeAttribute("aria-current");
    }
    for (const [name, view] of Object.entries(this.views)) view.hidden = name !== route.tab;
    if (route.tab === "conversation") {
      if (!this.opened) {
        this.opened = true;
        this.seq = route.seq;
        await this.conversation.open(route.seq);
      } else if (route.seq && route.seq !== this.seq) {
        this.seq = route.seq;
        await this.conversation.open(route.seq);
      }
    } else if (route.tab === "context") {
      if (this.context.stale) await this.context.load();
    } else if (route.tab === "artifacts") {
      await this.artifacts.show(route.artifactId, route.offset);
    }
    if (!this.headed) {
      this.headed = true; // after the first view's data: that is what the reader waits for
      this.refreshHeading();
    } else {
      clearTimeout(this.watchTimer); // shown again: the poll stopped while it was away
      this.poll();
    }
  }
}
