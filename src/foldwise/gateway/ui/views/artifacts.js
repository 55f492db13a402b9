// Artifacts of a thread: offloaded tool outputs, pasted inputs and compaction archives, with
// the same paging and search the model has (`read_offloaded`, `search_offloaded`).

import { api, query, threadPath } from "../api.js";
import { age, fmtBytes, fmtInt, fmtTokens, h, mount } from "../dom.js";

const ROWS = 100;
const KIND_LABEL = { tool: "tool output", human: "pasted input", archive: "compaction archive" };

/** A match's text with the matched part in `<mark>` (when `start`/`end` fall inside it). */
function marked(m) {
  const text = String(m.text ?? "");
  if (!Number.isInteger(m.start) || !Number.isInteger(m.end)) return text;
  const end = Math.min(m.end, text.length); // a match may reach into the next row
  if (m.start < 0 || m.start >= end) return text;
  return [text.slice(0, m.start), h("mark", {}, text.slice(m.start, end)), text.slice(end)];
}

export class Artifacts {
  constructor(threadId) {
    this.threadId = threadId;
    this.artifacts = null;
    this.current = null; // {id, offset}
    this.list = h("ul", { class: "artifact-list", testid: "artifact-list", "aria-label": "Artifacts" });
    this.viewer = h("section", { class: "artifact-viewer", testid: "artifact-viewer", "aria-label": "Artifact", hidden: true });
    this.listNote = h("p", { class: "muted" }, "Loading…");
    this.el = h(
      "section",
      { class: "artifacts", "aria-label": "Artifacts" },
      h("div", { class: "artifact-side card" }, h("h2", {}, "Artifacts"), this.listNote, this.list),
      this.viewer,
    );
  }

  path(rest = "") {
    return threadPath(this.threadId, `/artifacts${rest}`);
  }

  async loadList() {
    try {
      const data = await api(this.path());
      this.artifacts = data.artifacts || [];
      this.renderList();
    } catch (error) {
      this.listNote.textContent = `Could not list artifacts: ${error.detail || error.message}`;
    }
  }

  renderList() {
    const items = this.artifacts;
    this.listNote.textContent = items.length
      ? `${items.length} artifact${items.length === 1 ? "" : "s"}, newest first.`
      : "No artifacts: nothing was offloaded or archived in this thread.";
    mount(
      this.list,
      items.map((a) => {
        const href = `#/t/${encodeURIComponent(this.threadId)}/artifacts/${encodeURIComponent(a.artifact_id)}`;
        const origin = a.origin && typeof a.origin.seq === "number"
          ? h("a", { class: "origin", testid: "artifact-origin", href: `#/t/${encodeURIComponent(this.threadId)}?seq=${a.origin.seq}` }, `created at message ${a.origin.seq}`)
          : h("span", { class: "muted" }, "origin unknown");
        const item = h(
          "li",
          { class: "artifact-item", testid: "artifact-item", dataset: { artifactId: a.artifact_id } },
          h(
            "a",
            { class: "artifact-link", href },
            h("span", { class: `kind kind-${a.kind}` }, KIND_LABEL[a.kind] || a.kind),
            h("code", { class: "artifact-source" }, a.source),
            h("span", { class: "artifact-preview" }, a.preview || a.artifact_id),
          ),
          h(
            "div",
            { class: "artifact-meta" },
            h("span", { title: `${fmtInt(a.size_bytes)} bytes` }, fmtBytes(a.size_bytes)),
            h("span", {}, `${fmtTokens(a.tokens)} tokens`),
            h("span", {}, `${fmtInt(a.rows)} rows`),
            age(a.created_at),
            origin,
          ),
        );
        if (this.current && this.current.id === a.artifact_id) item.classList.add("selected");
        return item;
      }),
    );
  }

  /** Show the list (and, with `artifactId`, that artifact's page at `offset`). */
  async show(artifactId, offset = 0) {
    this.el.classList.toggle("has-viewer", Boolean(artifactId));
    if (this.artifacts === null) await this.loadList();
    if (!artifactId) {
      this.current = null;
      this.viewer.hidden = true;
      this.renderList();
      return;
    }
    if (!this.current || this.current.id !== artifactId) this.buildViewer(artifactId);
    this.renderList();
    await this.page(offset);
  }

  buildViewer(artifactId) {
    this.current = { id: artifactId, offset: 0, highlight: null };
    this.info = h("span", { class: "page-info", testid: "artifact-page-info", "aria-live": "polite" }, "");
    this.prev = h("button", { type: "button", testid: "artifact-prev", onclick: () => this.page(this.current.offset - ROWS) }, "← Previous");
    this.next = h("button", { type: "button", testid: "artifact-next", onclick: () => this.page(this.current.nextOffset) }, "Next →");
    this.rows = h("div", { class: "rows", testid: "artifact-rows", tabindex: "0", "aria-label": "Rows" });
    this.searchInput = h("input", { type: "search", testid: "artifact-search-input", placeholder: "Find text", "aria-label": "Search this artifact" });
    this.regex = h("input", { type: "checkbox", id: "artifact-regex" });
    this.results = h("ol", { class: "matches", testid: "artifact-search-results", "aria-label": "Matches" });
    this.searchNote = h("p", { class: "muted small" });
    const form = h(
      "form",
      { class: "artifact-search", role: "search" },
      this.searchInput,
      h("label", { class: "check" }, this.regex, " regex"),
      h("button", { type: "submit", testid: "artifact-search-submit" }, "Search"),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.search();
    });
    this.title = h("h2", {}, artifactId);
    this.meta = h("p", { class: "muted small" });
    mount(
      this.viewer,
      h("a", { class: "back-link", href: `#/t/${encodeURIComponent(this.threadId)}/artifacts` }, "← All artifacts"),
      this.title,
      this.meta,
      form,
      this.searchNote,
      this.results,
      h("div", { class: "pager" }, this.prev, this.info, this.next),
      this.rows,
    );
    this.viewer.hidden = false;
  }

  async page(offset) {
    const id = this.current.id;
    const start = Math.max(0, offset || 0);
    try {
      const data = await api(this.path(`/${encodeURIComponent(id)}${query({ offset: start, limit: ROWS })}`));
      if (!this.current || this.current.id !== id) return;
      this.current.offset = data.offset;
      this.current.nextOffset = data.next_offset;
      const ref = data.ref || {};
      this.title.textContent = `${KIND_LABEL[ref.kind] || "artifact"} · ${ref.source || ""}`;
      this.meta.textContent = `${id} · ${fmtBytes(ref.size_bytes)} · ${fmtInt(ref.lines)} lines · ${fmtTokens(ref.tokens)} tokens · sha256 ${String(ref.sha256 || "").slice(0, 12)}…`;
      mount(
        this.rows,
        data.rows.map((r) =>
          h(
            "div",
            { class: r.index === this.current.highlight ? "row highlight" : "row", dataset: { row: String(r.index) } },
            h("span", { class: "ln", "aria-hidden": "true" }, String(r.index)),
            h("span", { class: "tx" }, r.text),
          ),
        ),
      );
      const last = data.rows.length ? data.rows[data.rows.length - 1].index : start;
      this.info.textContent = data.rows.length
        ? `Rows ${fmtInt(data.rows[0].index)}–${fmtInt(last)} of ${fmtInt(ref.rows)}`
        : `No rows at ${fmtInt(start)} (of ${fmtInt(ref.rows)})`;
      this.prev.disabled = data.offset <= 0;
      this.next.disabled = data.next_offset == null;
      const hit = this.rows.querySelector(".row.highlight");
      if (hit) hit.scrollIntoView({ block: "center" });
      else this.rows.scrollTop = 0;
    } catch (error) {
      mount(this.rows, h("p", { class: "notice" }, `Could not read the artifact: ${error.detail || error.message}`));
    }
  }

  async search() {
    const pattern = this.searchInput.value;
    if (!pattern) return;
    const id = this.current.id;
    this.searchNote.textContent = "Searching…";
    try {
      const data = await api(
        this.path(`/${encodeURIComponent(id)}/search${query({ pattern, regex: this.regex.checked, max_matches: 50 })}`),
      );
      const matches = data.matches || [];
      this.searchNote.textContent = matches.length
        ? `${matches.length} match${matches.length === 1 ? "" : "es"}${data.complete ? "" : ` (stopped: ${data.stopped_reason || "limit"})`}`
        : "No match.";
      mount(
        this.results,
        matches.map((m) =>
          h(
            "li",
            {},
            h(
              "button",
              { type: "button", class: "match", testid: "artifact-match", dataset: { row: String(m.row) }, onclick: () => this.jump(m.row) },
              h("span", { class: "ln" }, `row ${m.row}`),
              " ",
              h("span", { class: "tx" }, marked(m)),
            ),
          ),
        ),
      );
    } catch (error) {
      this.searchNote.textContent = `Search failed: ${error.detail || error.message}`;
      this.results.replaceChildren();
    }
  }

  jump(row) {
    this.current.highlight = row;
    return this.page(Math.floor(row / ROWS) * ROWS);
  }
}
