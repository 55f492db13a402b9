// Long-term memory: the caller's facts with their validity history, search, quarantine
// review, the write queue and its dead letters.

import { api } from "../api.js";
import { age, debounce, fmtDate, fmtInt, fmtSeconds, h, mount, toast } from "../dom.js";

function slotOf(fact) {
  return `${fact.subject || "user"} · ${fact.attribute}`;
}

function validity(fact) {
  return `${fmtDate(fact.valid_from)} – ${fact.valid_to ? fmtDate(fact.valid_to) : "now"}`;
}

/** Superseded facts per active fact: along `superseded_by`, else by slot. */
function histories(facts) {
  const byId = new Map(facts.map((f) => [f.id, f]));
  const out = new Map();
  const headOf = (fact) => {
    let current = fact;
    for (let hops = 0; current && current.status === "superseded" && hops < 100; hops++) {
      current = current.superseded_by ? byId.get(current.superseded_by) : null;
    }
    return current && current.status !== "superseded" ? current : null;
  };
  const activeBySlot = new Map();
  for (const f of facts) {
    if (f.status === "active" && !activeBySlot.has(slotOf(f))) activeBySlot.set(slotOf(f), f);
  }
  for (const f of facts) {
    if (f.status !== "superseded") continue;
    const head = headOf(f) || activeBySlot.get(slotOf(f));
    if (!head) continue;
    if (!out.has(head.id)) out.set(head.id, []);
    out.get(head.id).push(f);
  }
  for (const list of out.values()) list.sort((a, b) => Date.parse(b.valid_from) - Date.parse(a.valid_from));
  return out;
}

function factNode(fact, history) {
  return h(
    "li",
    { class: `fact status-${fact.status}`, testid: "memory-fact", dataset: { factId: fact.id } },
    h(
      "div",
      { class: "fact-head" },
      h("code", { class: "slot" }, slotOf(fact)),
      h("span", { class: `badge status-${fact.status}` }, fact.status),
      fact.category ? h("span", { class: "muted small" }, fact.category) : null,
    ),
    h("p", { class: "fact-text" }, fact.text),
    h("p", { class: "muted small" }, `valid ${validity(fact)} · revision ${fact.revision ?? 1}${fact.reason ? ` · ${fact.reason}` : ""}`),
    history && history.length
      ? h(
          "ul",
          { class: "history", testid: "memory-history", "aria-label": "Earlier values" },
          history.map((old) =>
            h("li", {}, h("del", {}, old.text), " ", h("span", { class: "muted small" }, validity(old))),
          ),
        )
      : null,
  );
}

export class MemoryView {
  constructor() {
    this.facts = [];
    this.searchInput = h("input", {
      type: "search",
      class: "search",
      testid: "memory-search-input",
      placeholder: "Search facts",
      "aria-label": "Search facts",
    });
    this.searchInput.addEventListener("input", debounce(() => this.renderFacts(), 300));
    this.searchInput.addEventListener("keydown", (event) => {
      if (event.key === "Enter") this.renderFacts();
    });
    this.factList = h("ul", { class: "facts-list", testid: "memory-facts", "aria-label": "Facts" });
    this.factNote = h("p", { class: "muted small" });
    this.quarantine = h("ul", { class: "quarantine-list", testid: "quarantine-list", "aria-label": "Quarantined facts" });
    this.quarantineNote = h("p", { class: "muted small" });
    this.queue = h("div", { class: "queue", testid: "memory-queue" });
    this.dead = h("ul", { class: "dead-letters", testid: "memory-dead-letters", "aria-label": "Dead letters" });
    this.body = h(
      "div",
      { class: "memory-grid" },
      h("section", { class: "card facts-card" }, h("h2", {}, "Facts"), this.searchInput, this.factNote, this.factList),
      h(
        "div",
        { class: "memory-side" },
        h("section", { class: "card" }, h("h2", {}, "Quarantine"), this.quarantineNote, this.quarantine),
        h("section", { class: "card" }, h("h2", {}, "Write queue"), this.queue, h("h3", {}, "Dead letters"), this.dead),
      ),
    );
    this.disabled = h("p", { class: "notice", hidden: true });
    this.el = h(
      "section",
      { class: "memory", "aria-label": "Memory" },
      h("div", { class: "pane-head" }, h("a", { class: "back-link phone-only", href: "#/", testid: "nav-back" }, "← Threads"), h("h1", { class: "pane-title" }, "Memory")),
      this.disabled,
      this.body,
    );
  }

  async load() {
    try {
      const [facts, quarantined, queue] = await Promise.all([
        api("/memory/facts?limit=1000"),
        api("/memory/quarantine"),
        api("/memory/queue"),
      ]);
      this.disabled.hidden = true;
      this.body.hidden = false;
      this.facts = facts.facts || [];
      await this.renderFacts();
      this.renderQuarantine(quarantined.facts || []);
      this.renderQueue(queue);
    } catch (error) {
      this.disabled.textContent =
        error.status === 404 ? error.detail : `Could not read memory: ${error.detail || error.message}`;
      this.disabled.hidden = false;
      this.body.hidden = true;
    }
  }

  async renderFacts() {
    const q = this.searchInput.value.trim();
    const history = histories(this.facts);
    let shown;
    if (q) {
      try {
        const found = await api("/memory/search", { method: "POST", body: { query: q, k: 20 } });
        shown = found.facts || [];
      } catch (error) {
        this.factNote.textContent = `Search failed: ${error.detail || error.message}`;
        return;
      }
      this.factNote.textContent = shown.length ? `${shown.length} best match${shown.length === 1 ? "" : "es"} for “${q}”.` : `Nothing matches “${q}”.`;
    } else {
      shown = this.facts.filter((f) => f.status === "active" || f.status === "retracted");
      shown.sort((a, b) => (a.status === b.status ? slotOf(a).localeCompare(slotOf(b)) : a.status === "active" ? -1 : 1));
      this.factNote.textContent = shown.length ? `${fmtInt(shown.length)} facts; earlier values are struck through with the time they held.` : "No facts remembered yet.";
    }
    mount(this.factList, shown.map((f) => factNode(f, history.get(f.id))));
  }

  renderQuarantine(facts) {
    this.quarantineNote.textContent = facts.length
      ? "Held because they try to act on the agent; never injected until approved."
      : "Nothing held for review.";
    mount(
      this.quarantine,
      facts.map((f) =>
        h(
          "li",
          { class: "quarantine-item", testid: "quarantine-item", dataset: { factId: f.id } },
          h("div", { class: "fact-head" }, h("code", { class: "slot" }, slotOf(f)), h("span", { class: "muted small" }, "reason"), h("code", { class: "reason", testid: "quarantine-reason", title: "why it was held" }, f.reason || "unspecified")),
          h("p", { class: "fact-text" }, f.text),
          h("p", { class: "muted small" }, "recorded ", age(f.recorded_at)),
          h(
            "div",
            { class: "actions" },
            h("button", { type: "button", class: "primary", testid: "quarantine-approve", onclick: () => this.review(f, "approve") }, "Approve"),
            h("button", { type: "button", class: "danger", testid: "quarantine-reject", onclick: () => this.review(f, "reject") }, "Reject"),
          ),
        ),
      ),
    );
  }

  async review(fact, action) {
    try {
      await api(`/memory/quarantine/${encodeURIComponent(fact.id)}/${action}`, { method: "POST" });
      toast(action === "approve" ? "Fact approved: it is now active" : "Fact rejected: kept, retracted, for the record");
      await this.load();
    } catch (error) {
      toast(`Could not ${action} the fact: ${error.detail || error.message}`, "error");
    }
  }

  renderQueue(queue) {
    const counts = queue.counts || {};
    const names = Object.keys(counts);
    mount(
      this.queue,
      h(
        "dl",
        { class: "counts" },
        names.length
          ? names.map((n) => [h("dt", {}, n), h("dd", {}, fmtInt(counts[n]))])
          : [h("dt", {}, "rows"), h("dd", {}, "0")],
        h("dt", {}, "oldest pending"),
        h("dd", {}, queue.oldest_pending_seconds == null ? "none" : fmtSeconds(queue.oldest_pending_seconds)),
      ),
    );
    const dead = queue.dead || [];
    mount(
      this.dead,
      dead.length
        ? dead.map((d) =>
            h(
              "li",
              {},
              h("p", {}, h("code", {}, d.key), ` · ${fmtInt(d.attempts)} attempts · `, age(d.at)),
              d.thread_id ? h("a", { href: `#/t/${encodeURIComponent(d.thread_id)}` }, `thread ${d.thread_id}`) : null,
              h("pre", { class: "error-text" }, d.error || ""),
            ),
          )
        : h("li", { class: "muted" }, "None."),
    );
  }
}
