// Small DOM helpers. Every piece of text goes in as a text node (never as HTML), so untrusted
// strings from messages, tool output, artifacts and memory cannot become markup.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(parent, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    for (const c of child) append(parent, c);
  } else if (child instanceof Node) {
    parent.appendChild(child);
  } else {
    parent.appendChild(document.createTextNode(String(child)));
  }
}

function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.setAttribute("class", value);
    else if (name === "testid") el.dataset.testid = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
}

/** An HTML element: `h("a", {href: "#/", class: "x"}, "text", child, [more])`. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element; children as for `h`. */
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Replace the children of `el` with `children` (text is escaped by construction). */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const NUMBER = new Intl.NumberFormat("en-US");

/** `12345` -> `12,345`; null -> `–`. */
export function fmtInt(n) {
  return typeof n === "number" && Number.isFinite(n) ? NUMBER.format(Math.round(n)) : "–";
}

/** `3 messages`, `1 message`: a count with its noun. */
export function plural(n, noun, many = `${noun}s`) {
  return `${fmtInt(n)} ${n === 1 ? noun : many}`;
}

/** `12345` -> `12.3k` (compact token counts for meters and labels). */
export function fmtTokens(n) {
  if (typeof n !== "number" || !Number.isFinite(n)) return "–";
  if (Math.abs(n) >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (Math.abs(n) >= 1e4) return `${Math.round(n / 1e3)}k`;
  if (Math.abs(n) >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return String(Math.round(n));
}

export function fmtBytes(n) {
  if (typeof n !== "number" || !Number.isFinite(n)) return "–";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function fmtPercent(fraction) {
  if (typeof fraction !== "number" || !Number.isFinite(fraction)) return "–";
  return `${Math.round(fraction * 100)}%`;
}

function parseTime(value) {
  if (!value) return null;
  const t = Date.parse(value);
  return Number.isNaN(t) ? null : new Date(t);
}

/** `2026-01-02T03:04:05Z` -> `2 Jan 2026, 03:04`. */
export function fmtDate(value) {
  const d = parseTime(value);
  if (!d) return "–";
  return d.toLocaleString("en-GB", {
    day: "numeric",
    month: "short",
    year: "numeric",
    hour: "2-digit",
    minute: "2-digit",
  });
}

/** A relative age such as `5 min ago`. */
export function fmtAge(value, now = Date.now()) {
  const d = parseTime(value);
  if (!d) return "–";
  const s = Math.max(0, Math.round((now - d.getTime()) / 1000));
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  if (s < 86400 * 30) return `${Math.round(s / 86400)} d ago`;
  return fmtDate(value);
}

/** Seconds as `42 s`, `3 min`, `2 h`. */
export function fmtSeconds(s) {
  if (typeof s !== "number" || !Number.isFinite(s)) return "–";
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

/** A `<time>` element showing the age, with the exact date as its title. */
export function age(value) {
  return h("time", { datetime: value || null, title: fmtDate(value) }, fmtAge(value));
}

/** The plain text of a message's content (a string or a list of content blocks). */
export function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return content == null ? "" : JSON.stringify(content);
  const parts = [];
  for (const block of content) {
    if (typeof block === "string") parts.push(block);
    else if (block && typeof block.text === "string") parts.push(block.text);
    else if (block && block.type) parts.push(`[${block.type}]`);
  }
  return parts.join("");
}

let toastTimer = 0;

/** Show a transient notice in the `toast` element (role=status). */
export function toast(text, kind = "info") {
  const el = document.getElementById("toast");
  if (!el) return;
  el.textContent = text;
  el.dataset.kind = kind;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    el.hidden = true;
  }, 5000);
}

/** Open a modal `<dialog>`; on close, focus goes back to where it was. */
export function openDialog(dialog) {
  const previous = document.activeElement;
  dialog.addEventListener(
    "close",
    () => {
      if (previous instanceof HTMLElement && previous.isConnected) previous.focus();
    },
    { once: true },
  );
  if (!dialog.open) dialog.showModal();
}

/** Ask a yes/no question in the confirm dialog; resolves true when accepted. */
export function confirmDialog(question, acceptLabel = "Delete") {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-text").textContent = question;
  const accept = document.getElementById("confirm-accept");
  accept.textContent = acceptLabel;
  return new Promise((resolve) => {
    dialog.returnValue = "";
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "accept"), {
      once: true,
    });
    openDialog(dialog);
    document.getElementById("confirm-cancel").focus();
  });
}

/** Run `fn` at most once per `ms` after the last call. */
export function debounce(fn, ms) {
  let timer = 0;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
