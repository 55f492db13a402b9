// The thread list: search, status, last activity, counts, context fill; create and delete.

import { ApiError, api, threadPath } from "../api.js";
import { age, confirmDialog, debounce, fmtInt, fmtPercent, fmtTokens, h, mount, textOf, toast } from "../dom.js";

const PAGE = 50;
const POLL_MS = 15000;

/** A `/threads/search` record in the shape of `/threads/overview` (older gateways). */
function fromSearch(record) {
  const messages = (record.values && record.values.messages) || [];
  const first = messages.find((m) => m && (m.type === "human" || m.role === "user"));
  return {
    thread_id: record.thread_id,
    status: record.status,
    created_at: record.created_at,
    updated_at: record.updated_at,
    metadata: record.metadata || {},
    title: first ? textOf(first.content).slice(0, 120) : "",
    message_count: null,
    compaction_count: null,
    artifact_count: null,
    context: { tokens: null, window: null, fraction: null, as_of: null },
  };
}

/** A short display name for a thread: its title, else its id. */
export function threadLabel(thread) {
  if (thread && thread.title) return thread.title;
  const id = thread ? String(thread.thread_id) : "";
  return id.length > 13 ? `Thread ${id.slice(0, 8)}…` : `Thread ${id}`;
}

export class ThreadList {
  constructor({ onChange } = {}) {
    this.onChange = onChange || (() => {});
    this.threads = [];
    this.hasMore = false;
    this.query = "";
    this.activeId = null;
    this.overview = true; // false once the gateway answered 404 for /threads/overview
    this.loading = null;
    this.search = h("input", {
      type: "search",
      class: "search",
      placeholder: "Search threads",
      "aria-label": "Search threads",
      testid: "thread-search",
      autocomplete: "off",
    });
    this.search.addEventListener(
      "input",
      debounce(() => {
        this.query = this.search.value.trim();
        this.refresh();
      }, 250),
    );
    this.newButton = h(
      "button",
      { type: "button", class: "primary", testid: "thread-new", onclick: () => this.create() },
      "New thread",
    );
    this.list = h("ul", { class: "thread-list", testid: "thread-list", "aria-label": "Threads" });
    this.more = h(
      "button",
      { type: "button", class: "ghost more", hidden: true, onclick: () => this.loadMore() },
      "Show more threads",
    );
    this.status = h("p", { class: "muted empty", hidden: true });
    this.el = h(
      "div",
      { class: "threads" },
      h("div", { class: "threads-head" }, h("h1", { class: "pane-title" }, "Threads"), this.newButton),
      this.search,
      this.status,
      this.list,
      this.more,
    );
    setInterval(() => {
      if (document.visibilityState === "visible") this.refresh({ quiet: true });
    }, POLL_MS);
  }

  /** The listed record of a thread, if it is on the page. */
  get(threadId) {
    return this.threads.find((t) => t.thread_id === threadId) || null;
  }

  setActive(threadId) {
    this.activeId = threadId;
    for (const item of this.list.children) {
      const link = item.querySelector("a.thread-link");
      if (!link) continue;
      if (item.dataset.threadId === threadId) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }

  async fetchPage(offset, limit) {
    if (this.overview) {
      try {
        return await api("/threads/overview", {
          method: "POST",
          body: { limit, offset, query: this.query || undefined },
        });
      } catch (error) {
        if (!(error instanceof ApiError) || (error.status !== 404 && error.status !== 405)) {
          throw error;
        }
        this.overview = false;
      }
    }
    const records = await api("/threads/search", {
      method: "POST",
      body: { limit: limit + 1, offset, sort_by: "updated_at", sort_order: "desc" },
    });
    const q = this.query.toLowerCase();
    const threads = records.slice(0, limit).map(fromSearch);
    return {
      threads: q
        ? threads.filter((t) => `${t.thread_id} ${t.title}`.toLowerCase().includes(q))
        : threads,
      has_more: records.length > limit,
    };
  }

  /** Reload the listed threads (as many as are shown, at least one page). */
  async refresh({ quiet = false } = {}) {
    const limit = Math.min(200, Math.max(PAGE, this.threads.length));
    const job = this.fetchPage(0, limit);
    this.loading = job;
    try {
      const page = await job;
      if (this.loading !== job) return; // a newer refresh (another query) is on its way
      this.threads = page.threads;
      this.hasMore = page.has_more;
      this.render();
      this.onChange(this.threads);
    } catch (error) {
      if (!quiet) this.showError(error);
    }
  }

  async loadMore() {
    try {
      const page = await this.fetchPage(this.threads.length, PAGE);
      const known = new Set(this.threads.map((t) => t.thread_id));
      this.threads.push(...page.threads.filter((t) => !known.has(t.thread_id)));
      this.hasMore = page.has_more;
      this.render();
    } catch (error) {
      this.showError(error);
    }
  }

  showError(error) {
    this.status.hidden = false;
    this.status.textContent = `Could not list threads: ${error.detail || error.message}`;
  }

  async create() {
    this.newButton.disabled = true;
    try {
      const thread = await api("/threads", { method: "POST", body: { metadata: {} } });
      await this.refresh();
      location.hash = `#/t/${encodeURIComponent(thread.thread_id)}`;
    } catch (error) {
      toast(`Could not create a thread: ${error.detail || error.message}`, "error");
    } finally {
      this.newButton.disabled = false;
    }
  }

  async remove(thread) {
    const ok = await confirmDialog(
      `Delete “${threadLabel(thread)}”? Its messages, transcript, receipts and artifacts are removed for good.`,
    );
    if (!ok) return;
    try {
      await api(threadPath(thread.thread_id), { method: "DELETE" });
      toast("Thread deleted");
      if (this.activeId === thread.thread_id) location.hash = "#/";
      await this.refresh();
    } catch (error) {
      const why =
        error.status === 409
          ? "a run is in progress on this thread — wait for it to finish"
          : error.detail || error.message;
      toast(`Could not delete the thread: ${why}`, "error");
    }
  }

  item(thread) {
    const ctx = thread.context || {};
    const fill = h("meter", {
      class: "fill",
      testid: "thread-fill",
      min: 0,
      max: 1,
      low: 0.6,
      high: 0.85,
      optimum: 0,
      value: typeof ctx.fraction === "number" ? Math.min(1, ctx.fraction) : 0,
      title:
        typeof ctx.fraction === "number"
          ? `context ${fmtPercent(ctx.fraction)} full: ${fmtInt(ctx.tokens)} of ${fmtInt(ctx.window)} tokens`
          : "context fill unknown (no model call yet)",
      "aria-label": "Context fill",
    });
    const messages = thread.message_count;
    const compactions = thread.compaction_count;
    const link = h(
      "a",
      { class: "thread-link", href: `#/t/${encodeURIComponent(thread.thread_id)}` },
      h("span", { class: "thread-title", testid: "thread-title" }, threadLabel(thread)),
      h(
        "span",
        { class: "thread-meta" },
        h(
          "span",
          { class: `status status-${thread.status}`, testid: "thread-status" },
          thread.status || "unknown",
        ),
        h(
          "span",
          { testid: "thread-messages", title: "messages in the transcript" },
          messages == null ? "– msgs" : `${fmtInt(messages)} msg${messages === 1 ? "" : "s"}`,
        ),
        h(
          "span",
          { testid: "thread-compactions", title: "compactions" },
          compactions == null
            ? "– folds"
            : `${fmtInt(compactions)} fold${compactions === 1 ? "" : "s"}`,
        ),
        age(thread.updated_at),
      ),
      h(
        "span",
        { class: "thread-fill-row" },
        fill,
        h(
          "span",
          { class: "fill-label" },
          typeof ctx.fraction === "number" ? `${fmtTokens(ctx.tokens)} · ${fmtPercent(ctx.fraction)}` : "–",
        ),
      ),
    );
    if (thread.thread_id === this.activeId) link.setAttribute("aria-current", "page");
    const remove = h(
      "button",
      {
        type: "button",
        class: "icon-button",
        testid: "thread-delete",
        "aria-label": `Delete ${threadLabel(thread)}`,
        title: "Delete thread",
        onclick: () => this.remove(thread),
      },
      "✕",
    );
    return h(
      "li",
      { class: "thread-item", testid: "thread-item", dataset: { threadId: thread.thread_id } },
      link,
      remove,
    );
  }

  render() {
    // A refresh must not take the keyboard focus away from the item it was on.
    const focused = document.activeElement;
    const was = focused && this.list.contains(focused) ? focused.closest(".thread-item") : null;
    const wasDelete = focused && focused.dataset && focused.dataset.testid === "thread-delete";
    mount(this.list, this.threads.map((t) => this.item(t)));
    if (was) {
      const again = [...this.list.children].find((li) => li.dataset.threadId === was.dataset.threadId);
      const target = again && again.querySelector(wasDelete ? "button" : "a");
      if (target) target.focus();
    }
    this.more.hidden = !this.hasMore;
    this.status.hidden = this.threads.length > 0;
    if (!this.threads.length) {
      this.status.textContent = this.query
        ? `No thread matches “${this.query}”.`
        : "No threads yet. Create one to start.";
    }
  }
}
