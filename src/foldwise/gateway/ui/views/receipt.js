// The receipt of one compaction, in a dialog opened by its transcript marker.

import { api, query, threadPath } from "../api.js";
import { fmtDate, fmtInt, h, mount, openDialog } from "../dom.js";

const RECEIPT_PAGE = 1000;

/** The full receipt from /compactions (attempts, rescued, duration), or null. */
async function findReceipt(threadId, receiptId) {
  for (let offset = 0; offset < 20 * RECEIPT_PAGE; offset += RECEIPT_PAGE) {
    const page = await api(
      threadPath(threadId, `/compactions${query({ limit: RECEIPT_PAGE, offset })}`),
    );
    const found = page.find((r) => r.id === receiptId);
    if (found) return found;
    if (page.length < RECEIPT_PAGE) return null;
  }
  return null;
}

function row(label, ...value) {
  return [h("dt", {}, label), h("dd", {}, ...value)];
}

function ms(value) {
  return typeof value === "number" ? `${fmtInt(value)} ms` : "–";
}

function attemptsTable(attempts) {
  if (!attempts || !attempts.length) return h("p", { class: "muted" }, "No attempts recorded.");
  return h(
    "table",
    { class: "attempts" },
    h("thead", {}, h("tr", {}, h("th", {}, "Model"), h("th", {}, "Result"), h("th", {}, "Time"))),
    h(
      "tbody",
      {},
      attempts.map((a) =>
        h(
          "tr",
          {},
          h("td", {}, h("code", {}, a.model || "?")),
          h("td", { class: a.ok ? "ok" : "failed" }, a.ok ? "summary written" : `failed: ${a.error || "?"}`),
          h("td", {}, ms(a.duration_ms)),
        ),
      ),
    ),
  );
}

function content(threadId, r) {
  const saved =
    typeof r.tokens_before === "number" && r.tokens_before > 0
      ? ` (−${Math.round((1 - r.tokens_after / r.tokens_before) * 100)}%)`
      : "";
  const metric =
    typeof r.metric === "number"
      ? `${fmtInt(r.metric)}${typeof r.threshold === "number" ? ` against a limit of ${fmtInt(r.threshold)}` : ""}`
      : "–";
  const archive = r.archive_id
    ? h(
        "a",
        {
          href: `#/t/${encodeURIComponent(threadId)}/artifacts/${encodeURIComponent(r.archive_id)}`,
          onclick: () => document.getElementById("receipt-dialog").close(),
        },
        r.archive_id,
      )
    : "none (archiving off)";
  return [
    h(
      "dl",
      { class: "facts" },
      row("When", fmtDate(r.created_at)),
      row("Kind", r.manual ? "manual (/compact)" : "automatic"),
      row("Trigger", h("code", {}, r.trigger || "?"), r.reason ? ` — ${r.reason}` : ""),
      row("Metric", metric),
      row("Tokens", `${fmtInt(r.tokens_before)} → ${fmtInt(r.tokens_after)}${saved}`),
      row(
        "Messages",
        `${fmtInt(r.messages_removed)} removed · ${fmtInt(r.messages_preserved)} preserved · ` +
          `${r.messages_rescued == null ? "–" : fmtInt(r.messages_rescued)} rescued`,
      ),
      row("Summarizer", h("code", {}, r.model_used || "?"), ` · ${(r.attempts || []).length || "–"} attempt(s)`),
      row("Summary", `${fmtInt(r.summary_chars)} characters`),
      row("Duration", ms(r.duration_ms)),
      row(
        "Summary made",
        r.precomputed ? "in the background, before the compaction fired" : "during the compaction",
      ),
      row("Archive", archive),
      row("Receipt", h("code", {}, r.id || r.receipt_id || "?")),
    ),
    h("h3", {}, "Summarizer attempts"),
    attemptsTable(r.attempts),
  ];
}

/** Open the receipt dialog for a marker entry; the full receipt is fetched when needed. */
export async function openReceipt(threadId, entry) {
  const dialog = document.getElementById("receipt-dialog");
  const body = document.getElementById("receipt-content");
  const marker = entry.message || {};
  const receiptId = marker.receipt_id;
  document.getElementById("receipt-title").textContent = "Compaction receipt";
  const close = document.getElementById("receipt-close");
  close.onclick = () => dialog.close();
  mount(body, content(threadId, { ...marker, id: receiptId }));
  openDialog(dialog);
  close.focus();
  if (!receiptId) return;
  try {
    const full = await findReceipt(threadId, receiptId);
    if (full && dialog.open) mount(body, content(threadId, { ...marker, ...full }));
  } catch (error) {
    body.append(h("p", { class: "notice" }, `Could not load the full receipt: ${error.detail || error.message}`));
  }
}
