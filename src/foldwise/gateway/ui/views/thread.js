// One thread's pane: its heading, the tabs (conversation, context, artifacts) and their views.

import { api, threadPath } from "../api.js";
import { h, textOf } from "../dom.js";
import { Artifacts } from "./artifacts.js";
import { ContextPanel } from "./context.js";
import { Conversation } from "./conversation.js";
import { threadLabel } from "./threads.js";

const TABS = [
  ["conversation", "Conversation", ""],
  ["context", "Context", "/context"],
  ["artifacts", "Artifacts", "/artifacts"],
];

export class ThreadPane {
  constructor(threadId, { listed, onRunFinished }) {
    this.threadId = threadId;
    this.opened = false;
    this.seq = null;
    this.context = new ContextPanel(threadId);
    this.artifacts = new Artifacts(threadId);
    this.conversation = new Conversation(threadId, {
      assistantId: listed && listed.metadata && listed.metadata.assistant_id,
      onRunFinished: () => {
        this.context.markStale();
        this.artifacts.artifacts = null;
        this.refreshHeading();
        if (this.tab === "context") this.context.load();
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
        h("a", { class: "back-link phone-only", href: "#/" }, "← Threads"),
        h("div", { class: "heading-row" }, this.title, this.status),
        h("nav", { class: "tabs", "aria-label": "Thread views" }, this.tabs),
      ),
      this.missing,
      h("div", { class: "pane-body" }, Object.values(this.views)),
    );
    this.refreshHeading();
  }

  async refreshHeading() {
    try {
      const thread = await api(threadPath(this.threadId));
      const messages = (thread.values && thread.values.messages) || [];
      const assistant = thread.metadata && thread.metadata.assistant_id;
      if (assistant) this.conversation.assistantId = assistant;
      if (this.title.textContent.startsWith("Thread ")) {
        const first = messages.find((m) => m && m.type === "human");
        if (first) this.title.textContent = textOf(first.content).slice(0, 120);
      }
      this.status.textContent = thread.status;
      this.status.className = `status status-${thread.status}`;
      this.status.hidden = false;
    } catch (error) {
      if (error.status === 404) {
        this.missing.textContent = `Thread ${this.threadId} was not found (deleted, or not yours).`;
        this.missing.hidden = false;
      }
    }
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
  }
}
