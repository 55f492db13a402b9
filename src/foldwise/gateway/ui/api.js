// The gateway's HTTP API: JSON calls with the API key, the auth dialog on 401, and run
// streams read from fetch (a POST, so no EventSource) as Server-Sent Events.

import { openDialog } from "./dom.js";

const KEY_NAME = "foldwise.apiKey";

/** An HTTP error answer: `status` and the gateway's `detail` in plain text. */
export class ApiError extends Error {
  constructor(status, detail, body) {
    super(detail || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail || `HTTP ${status}`;
    this.body = body;
  }
}

function storedKey() {
  try {
    return sessionStorage.getItem(KEY_NAME) || "";
  } catch {
    return "";
  }
}

function headers(extra) {
  const out = { Accept: "application/json", ...extra };
  const key = storedKey();
  if (key) out["x-api-key"] = key;
  return out;
}

/** The `detail` of an error body as one line (FastAPI's 422 lists are joined). */
export function detailText(body) {
  const detail = body && typeof body === "object" ? body.detail : body;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((d) => {
        const loc = Array.isArray(d.loc) ? d.loc.filter((p) => p !== "body").join(".") : "";
        return loc ? `${loc}: ${d.msg}` : String(d.msg);
      })
      .join("; ");
  }
  return detail == null ? "" : JSON.stringify(detail);
}

let waitingForKey = null;

/** Show the auth dialog once for every call that got a 401; resolves when a key is entered. */
function askForKey(reason) {
  if (waitingForKey) return waitingForKey;
  const dialog = document.getElementById("auth-dialog");
  const form = document.getElementById("auth-form");
  const input = document.getElementById("auth-key-input");
  const why = document.getElementById("auth-reason");
  why.textContent = storedKey()
    ? "The gateway refused the key kept for this tab. Enter another one."
    : "This gateway needs an API key.";
  if (reason) why.title = reason;
  input.value = "";
  waitingForKey = new Promise((resolve, reject) => {
    const submit = (event) => {
      event.preventDefault();
      const key = input.value.trim();
      if (!key) {
        input.focus();
        return;
      }
      try {
        sessionStorage.setItem(KEY_NAME, key);
      } catch {
        // Session storage refused (privacy mode): the key is then asked again on reload.
      }
      cleanup();
      dialog.close("ok");
      resolve();
    };
    const cancel = () => {
      cleanup();
      reject(new ApiError(401, "an API key is needed to use this gateway"));
    };
    const cleanup = () => {
      form.removeEventListener("submit", submit);
      dialog.removeEventListener("cancel", cancel);
      waitingForKey = null;
    };
    form.addEventListener("submit", submit);
    dialog.addEventListener("cancel", cancel);
    openDialog(dialog);
    input.focus();
  });
  return waitingForKey;
}

async function errorOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  return new ApiError(response.status, detailText(body), body);
}

/**
 * Fetch `path`, asking for the key on 401 and retrying. Returns the Response (ok only).
 * Throws `ApiError` for any other error status.
 */
async function send(path, { method = "GET", body, signal, accept } = {}) {
  for (;;) {
    const extra = body === undefined ? {} : { "Content-Type": "application/json" };
    if (accept) extra.Accept = accept;
    const response = await fetch(path, {
      method,
      headers: headers(extra),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: "omit",
      cache: "no-store",
    });
    if (response.status === 401) {
      const error = await errorOf(response);
      await askForKey(error.detail);
      continue;
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }
}

/** A JSON API call; resolves to the decoded body (null for 204). */
export async function api(path, options = {}) {
  const response = await send(path, options);
  if (response.status === 204) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

/** `?a=1&b=2` from an object, skipping null/undefined values. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== "") search.set(k, String(v));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** `/threads/{id}` with the id escaped. */
export function threadPath(threadId, rest = "") {
  return `/threads/${encodeURIComponent(threadId)}${rest}`;
}

function parseBlock(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  const raw = data.join("\n");
  try {
    return { event, data: JSON.parse(raw) };
  } catch {
    return { event, data: raw };
  }
}

/**
 * POST a run stream and call `onEvent({event, data})` per Server-Sent Event until it ends.
 * Resolves when the stream is over; throws `ApiError` when the POST is refused.
 */
export async function streamRun(threadId, body, onEvent, signal) {
  const response = await send(threadPath(threadId, "/runs/stream"), {
    method: "POST",
    body,
    signal,
    accept: "text/event-stream",
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let carry = ""; // a trailing CR may be the first half of a CRLF split across chunks
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    let text = carry + decoder.decode(value, { stream: true });
    carry = text.endsWith("\r") ? "\r" : "";
    if (carry) text = text.slice(0, -1);
    buffer += text.replace(/\r\n?/g, "\n");
    let cut = buffer.indexOf("\n\n");
    while (cut !== -1) {
      const parsed = parseBlock(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (parsed) onEvent(parsed);
      cut = buffer.indexOf("\n\n");
    }
  }
  const last = parseBlock((buffer + carry).replace(/\r\n?/g, "\n").trim());
  if (last) onEvent(last);
}
