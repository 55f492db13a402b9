// The per-call chart: input tokens of each model call, compactions as dips, the trigger line.

import { fmtDate, fmtInt, fmtTokens, svg } from "../dom.js";

const H = 200;
const PAD = { left: 46, right: 12, top: 12, bottom: 24 };

/** An SVG chart (`data-testid=calls-chart`) of `/threads/{id}/calls`. */
export function callsChart(data, width = 640) {
  // Drawn at the width it is shown at, so labels keep their size on a phone.
  const W = Math.max(300, Math.round(width));
  const calls = data.calls || [];
  const compactions = data.compactions || [];
  const trigger = typeof data.trigger_tokens === "number" ? data.trigger_tokens : null;
  const tops = [...calls.map((c) => c.input_tokens || 0), ...compactions.map((c) => c.tokens_before || 0)];
  if (trigger) tops.push(trigger);
  const top = Math.max(1, ...tops) * 1.1;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  // Calls and compactions share one axis ordered by transcript seq: a compaction sits where it
  // happened between two calls.
  const points = [
    ...calls.map((c) => ({ kind: "call", seq: c.seq, item: c })),
    ...compactions.map((c) => ({ kind: "compaction", seq: c.seq, item: c })),
  ].sort((a, b) => a.seq - b.seq);
  const step = points.length > 1 ? plotW / (points.length - 1) : 0;
  const x = (i) => PAD.left + (points.length > 1 ? i * step : plotW / 2);
  const y = (v) => PAD.top + plotH - (Math.max(0, v) / top) * plotH;

  const chart = svg("svg", {
    class: "chart",
    testid: "calls-chart",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": `Input tokens of the last ${calls.length} model calls and ${compactions.length} compactions`,
  });
  for (const fraction of [0, 0.5, 1]) {
    const value = (top / 1.1) * fraction;
    chart.append(
      svg("line", { class: "grid", x1: PAD.left, x2: W - PAD.right, y1: y(value), y2: y(value) }),
      svg("text", { class: "axis", x: PAD.left - 6, y: y(value) + 4, "text-anchor": "end" }, fmtTokens(value)),
    );
  }
  if (trigger) {
    chart.append(
      svg("line", { class: "trigger", x1: PAD.left, x2: W - PAD.right, y1: y(trigger), y2: y(trigger) }),
      svg("text", { class: "axis trigger-label", x: W - PAD.right, y: y(trigger) - 4, "text-anchor": "end" }, `trigger ${fmtTokens(trigger)}`),
    );
  }
  const line = [];
  points.forEach((p, i) => {
    if (p.kind === "call") line.push(`${x(i)},${y(p.item.input_tokens || 0)}`);
    else {
      line.push(`${x(i)},${y(p.item.tokens_before || 0)}`);
      line.push(`${x(i)},${y(p.item.tokens_after || 0)}`);
    }
  });
  if (line.length > 1) chart.append(svg("polyline", { class: "calls-line", points: line.join(" ") }));
  points.forEach((p, i) => {
    if (p.kind === "call") {
      const c = p.item;
      chart.append(
        svg(
          "circle",
          { class: "call-point", cx: x(i), cy: y(c.input_tokens || 0), r: points.length > 120 ? 1.5 : 3 },
          svg("title", {}, `call at seq ${c.seq}: ${fmtInt(c.input_tokens)} in, ${fmtInt(c.output_tokens)} out${c.model ? ` (${c.model})` : ""} — ${fmtDate(c.created_at)}`),
        ),
      );
    } else {
      const c = p.item;
      chart.append(
        svg("line", { class: "compaction-line", x1: x(i), x2: x(i), y1: PAD.top, y2: PAD.top + plotH }),
        svg(
          "path",
          {
            class: "compaction-point",
            d: `M ${x(i) - 5} ${y(c.tokens_after || 0) - 6} L ${x(i) + 5} ${y(c.tokens_after || 0) - 6} L ${x(i)} ${y(c.tokens_after || 0) + 2} Z`,
          },
          svg("title", {}, `${c.manual ? "manual" : "automatic"} compaction at seq ${c.seq}: ${fmtInt(c.tokens_before)} → ${fmtInt(c.tokens_after)} tokens`),
        ),
      );
    }
  });
  chart.append(
    svg("text", { class: "axis", x: PAD.left, y: H - 6 }, calls.length ? `seq ${points[0].seq}` : "no model calls yet"),
    svg("text", { class: "axis", x: W - PAD.right, y: H - 6, "text-anchor": "end" }, points.length ? `seq ${points[points.length - 1].seq}` : ""),
  );
  return chart;
}
