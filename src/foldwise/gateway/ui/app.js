// The page's entry point: hash routing and the shell (sidebar thread list + main pane on a
// desktop, one pane with back navigation on a phone).
//
// Routes: #/  #/t/{id}  #/t/{id}?seq=N  #/t/{id}/context  #/t/{id}/artifacts
//         #/t/{id}/artifacts/{artifact_id}  #/memory

import { h, mount } from "./dom.js";
import { MemoryView } from "./views/memory.js";
import { ThreadPane } from "./views/thread.js";
import { ThreadList } from "./views/threads.js";

const PHONE = window.matchMedia("(max-width: 899.98px)");

/** The route of a location hash (unknown hashes are the thread list). */
export function parseRoute(hash) {
  const raw = (hash || "").replace(/^#/, "") || "/";
  const [path, search = ""] = raw.split("?", 2);
  const params = new URLSearchParams(search);
  const parts = path.split("/").filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  const int = (name) => {
    const n = Number.parseInt(params.get(name) || "", 10);
    return Number.isFinite(n) && n >= 0 ? n : null;
  };
  if (parts[0] === "memory") return { name: "memory" };
  if (parts[0] === "t" && parts[1]) {
    const route = { name: "thread", threadId: parts[1], tab: "conversation", seq: int("seq") };
    if (parts[2] === "context") route.tab = "context";
    if (parts[2] === "artifacts") {
      route.tab = "artifacts";
      route.artifactId = parts[3] || null;
      route.offset = int("offset") || 0;
    }
    return route;
  }
  return { name: "home" };
}

class App {
  constructor() {
    this.root = document.getElementById("app");
    this.sidebar = document.getElementById("sidebar");
    this.main = document.getElementById("main");
    this.navThreads = document.getElementById("nav-threads");
    this.navMemory = document.getElementById("nav-memory");
    this.list = new ThreadList({
      onChange: () => {
        if (this.pane) this.pane.update(this.list.get(this.pane.threadId));
      },
    });
    mount(this.sidebar, this.list.el);
    this.pane = null;
    this.memory = null;
    this.welcome = h(
      "section",
      { class: "welcome card" },
      h("h1", { class: "pane-title" }, "What the model saw"),
      h(
        "p",
        {},
        "Pick a thread to read its full transcript — including the messages compaction folded away — see what the next request holds, browse its artifacts, or check long-term memory.",
      ),
      h("p", { class: "muted" }, "Nothing here is fetched from the network: the page and its data come from this gateway."),
    );
    window.addEventListener("hashchange", () => this.route());
    PHONE.addEventListener("change", () => this.route());
    this.start();
  }

  async start() {
    // A thread's transcript is asked for before the list, so its first page paints first.
    const first = parseRoute(location.hash);
    if (first.name === "thread") await this.route();
    this.list.refresh();
    if (first.name !== "thread") await this.route();
  }

  nav(active) {
    for (const [link, name] of [
      [this.navThreads, "threads"],
      [this.navMemory, "memory"],
    ]) {
      if (name === active) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }

  show(view) {
    if (this.main.firstElementChild !== view) mount(this.main, view);
  }

  async route() {
    const route = parseRoute(location.hash);
    this.root.dataset.view = route.name === "home" ? "list" : "detail";
    this.list.setActive(route.name === "thread" ? route.threadId : null);
    if (route.name === "memory") {
      this.nav("memory");
      if (!this.memory) this.memory = new MemoryView();
      this.show(this.memory.el);
      document.title = "Memory · foldwise";
      await this.memory.load();
      return;
    }
    this.nav("threads");
    if (route.name === "home") {
      document.title = "foldwise";
      this.show(this.welcome);
      return;
    }
    if (!this.pane || this.pane.threadId !== route.threadId) {
      this.pane = new ThreadPane(route.threadId, {
        listed: this.list.get(route.threadId),
        onRunFinished: () => this.list.refresh({ quiet: true }),
      });
      this.show(this.pane.el);
      if (PHONE.matches) this.pane.title.focus();
    } else {
      this.show(this.pane.el);
    }
    document.title = `${this.pane.title.textContent} · foldwise`;
    await this.pane.show(route);
  }
}

window.addEventListener("unhandledrejection", (event) => {
  // Every expected failure is shown where it happened; anything else is a bug worth a notice.
  const el = document.getElementById("toast");
  if (el) {
    el.textContent = `Unexpected error: ${event.reason && event.reason.message ? event.reason.message : event.reason}`;
    el.hidden = false;
  }
});

new App();
