"""`write_html_report`: one self-contained HTML page (inline CSS and SVG, no script, no network)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from foldwise.replay._render import comparison_rows, format_bytes
from foldwise.replay._report import ReplayReport

__all__ = ["render_html_report", "write_html_report"]

_COLORS = {
    "foldwise": "#1a7f5a",
    "langchain": "#d9822b",
    "langchain-matched": "#b8336a",
    "deepagents": "#3c6fd1",
    "raw": "#8a8f98",
}
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans CJK SC",
sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 6px}
h3{font-size:15px;margin:18px 0 6px}
.sub{color:#5b6475;margin:0 0 16px}
section{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:8px 20px 16px;
margin:18px 0}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:5px 7px;border-bottom:1px solid #eceef2;text-align:right;white-space:nowrap}
th{background:#f1f3f6;font-weight:600;color:#39414f}
td.l,th.l{text-align:left}td.wrap{white-space:normal;text-align:left;color:#39414f}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
.bad{color:#c0262d;font-weight:600}.good{color:#1a7f5a;font-weight:600}
.note{color:#5b6475;font-size:12px}
details{margin-top:10px}summary{cursor:pointer;color:#39414f;font-weight:600}
svg text{font-family:inherit}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:2px 0 8px 64px;font-size:12.5px}
.lg{display:inline-flex;align-items:center}
.ln{display:inline-block;width:22px;border-top:3px solid;margin-right:6px}
.mk{font-weight:700;margin-right:5px}
.scroll{overflow-x:auto}
th{white-space:normal;vertical-align:bottom}
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _nice_top(value: int) -> int:
    steps = (1, 2, 2.5, 5, 10)
    magnitude = 10 ** max(0, len(str(max(1, value))) - 1)
    for step in steps:
        top = int(step * magnitude)
        if top >= value:
            return top
    return int(10 * magnitude)


@dataclass(frozen=True)
class _Plot:
    """The chart's geometry: the plot area inside the SVG and the scales of both axes."""

    width: int
    height: int
    calls: int
    y_top: int
    left: int = 64
    right: int = 16
    top: int = 16
    bottom: int = 40

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.top - self.bottom

    def x(self, i: int) -> float:
        return self.left + (self.plot_w * i / max(1, self.calls - 1))

    def y(self, v: int) -> float:
        return self.top + self.plot_h - self.plot_h * min(v, self.y_top) / self.y_top


def _axes(plot: _Plot, window: int | None) -> list[str]:
    """Grid lines with token labels, call numbers, axis titles and the window line."""
    left, top, plot_w, plot_h = plot.left, plot.top, plot.plot_w, plot.plot_h
    parts = []
    for k in range(6):
        value = plot.y_top * k // 5
        yy = plot.y(value)
        parts.append(
            f'<line x1="{left}" y1="{yy:.1f}" x2="{left + plot_w}" y2="{yy:.1f}" '
            'stroke="#e3e6ec"/>'
            f'<text x="{left - 8}" y="{yy + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#5b6475">{value / 1000:,.0f}k</text>'
        )
    calls = plot.calls
    for k in range(min(calls, 10) + 1):
        index = round((calls - 1) * k / max(1, min(calls, 10)))
        parts.append(
            f'<text x="{plot.x(index):.1f}" y="{top + plot_h + 16}" font-size="11" '
            f'text-anchor="middle" fill="#5b6475">{index}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{plot.height - 6}" font-size="12" '
        'text-anchor="middle" fill="#39414f">model call</text>'
        f'<text x="14" y="{top + plot_h / 2:.0f}" font-size="12" text-anchor="middle" '
        f'fill="#39414f" transform="rotate(-90 14 {top + plot_h / 2:.0f})">'
        "request tokens</text>"
    )
    if window:
        parts.append(
            f'<line x1="{left}" y1="{plot.y(window):.1f}" x2="{left + plot_w}" '
            f'y2="{plot.y(window):.1f}" stroke="#c0262d" stroke-dasharray="6 4" '
            'stroke-width="1.2"/>'
            f'<text x="{left + plot_w - 4}" y="{plot.y(window) - 5:.1f}" font-size="11" '
            f'text-anchor="end" fill="#c0262d">window {window:,}</text>'
        )
    return parts


def _series(plot: _Plot, report: ReplayReport) -> list[str]:
    """One system's line, with a circle per compaction and a cross per overflow refusal."""
    color = _COLORS.get(report.system, "#555")
    points = " ".join(
        f"{plot.x(c.index):.1f},{plot.y(c.provider_tokens):.1f}" for c in report.calls
    )
    dash = ' stroke-dasharray="3 3"' if report.system == "raw" else ""
    parts = [
        f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.8"'
        f' stroke-linejoin="round"{dash}/>'
    ]
    for call in report.calls:
        cx, cy = plot.x(call.index), plot.y(call.provider_tokens)
        for event in call.compactions:
            parts.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4.2" fill="#fff" stroke="{color}" '
                f'stroke-width="2"><title>{_esc(report.label)}: compaction before call '
                f"{call.index} ({_esc(event.trigger)}): {_esc(event.reason)}</title></circle>"
            )
        if call.rejected or call.failed:
            parts.append(
                f'<path d="M{cx - 4:.1f} {cy - 4:.1f}L{cx + 4:.1f} {cy + 4:.1f}'
                f'M{cx - 4:.1f} {cy + 4:.1f}L{cx + 4:.1f} {cy - 4:.1f}" stroke="#c0262d" '
                f'stroke-width="2"><title>{_esc(report.label)}: call {call.index} '
                f"{'failed' if call.failed else 'retried'} after {call.rejected} overflow "
                f"rejection(s)</title></path>"
            )
    return parts


def _legend(runs: Sequence[ReplayReport]) -> str:
    legend = "".join(
        f"<span class='lg'><span class='ln' style='border-color:{_COLORS.get(r.system, '#555')};"
        f"{'border-top-style:dashed;' if r.system == 'raw' else ''}'></span>{_esc(r.label)}</span>"
        for r in runs
    )
    legend += (
        "<span class='lg'><span class='mk'>○</span>compaction</span>"
        "<span class='lg'><span class='mk bad'>×</span>request refused for overflow "
        "(HTTP 400)</span>"
    )
    return f"<div class='legend'>{legend}</div>"


def _chart(reports: Sequence[ReplayReport], *, width: int = 1080, height: int = 340) -> str:
    """Inline SVG: context tokens per call, one line per system, compaction and 400 markers."""
    runs = [r for r in reports if r.available and r.calls]
    if not runs:
        return '<p class="note">no model call was replayed</p>'
    window = next((r.window for r in runs if r.window), None)
    peak = max(max(c.provider_tokens for c in r.calls) for r in runs)
    plot = _Plot(
        width=width,
        height=height,
        calls=max(len(r.calls) for r in runs),
        y_top=_nice_top(int(max(peak, window or 0) * 1.05)),
    )
    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" '
        'aria-label="context tokens per model call">',
        *_axes(plot, window),
    ]
    for report in runs:
        parts += _series(plot, report)
    parts.append("</svg>")
    return "".join(parts) + _legend(runs)


def _summary_table(reports: Sequence[ReplayReport]) -> str:
    head = (
        "<tr><th class='l'>system</th><th>calls</th><th>compactions</th><th>peak tokens</th>"
        "<th>total prompt tokens</th><th>foldwise ÷ it</th><th>human verbatim</th>"
        "<th>+ recoverable</th><th>offloaded</th><th>overflow 400s</th><th>failed calls</th></tr>"
    )
    rows = []
    for row, report in zip(comparison_rows(reports), reports, strict=True):
        swatch = f"<span class='sw' style='background:{_COLORS.get(report.system, '#555')}'></span>"
        if "calls" not in row:
            rows.append(
                f"<tr><td class='l'>{swatch}{_esc(row['system'])}</td>"
                f"<td class='wrap' colspan='10'>not run: {_esc(row['note'])}</td></tr>"
            )
            continue
        bad = " class='bad'" if report.rejections or report.failures else ""
        keep = " class='good'" if report.human_kept >= 1 else " class='bad'"
        rows.append(
            f"<tr><td class='l'>{swatch}{_esc(row['system'])}</td><td>{row['calls']}</td>"
            f"<td>{row['compactions']}</td><td>{row['peak']}</td><td>{row['total']}</td>"
            f"<td>{row['foldwise_ratio']}</td><td>{row['human_verbatim']}</td>"
            f"<td{keep}>{row['human_kept']}</td><td>{row['offloaded']}</td>"
            f"<td{bad}>{row['rejections']}</td><td{bad}>{row['failed']}</td></tr>"
        )
    return f"<div class='scroll'><table>{head}{''.join(rows)}</table></div>"


def _receipts(report: ReplayReport) -> str:
    events = report.compactions
    if not events:
        return f"<p class='note'>{_esc(report.label)}: no compaction.</p>"
    head = (
        "<tr><th>before call</th><th class='l'>trigger</th><th>tokens before</th>"
        "<th>after</th><th>removed</th><th>kept</th><th>summary chars</th>"
        "<th class='l'>reason</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{e.call}</td><td class='l'>{_esc(e.trigger)}</td>"
        f"<td>{'' if e.tokens_before is None else f'{e.tokens_before:,}'}</td>"
        f"<td>{'' if e.tokens_after is None else f'{e.tokens_after:,}'}</td>"
        f"<td>{e.messages_removed}</td>"
        f"<td>{'' if e.messages_preserved is None else e.messages_preserved}</td>"
        f"<td>{e.summary_chars:,}</td><td class='wrap'>{_esc(e.reason)}</td></tr>"
        for e in events
    )
    open_attr = " open" if report.system == "foldwise" else ""
    return (
        f"<details{open_attr}><summary>{_esc(report.label)}: {len(events)} compaction(s)"
        f"</summary><div class='scroll'><table>{head}{rows}</table></div></details>"
    )


def _trace_section(reports: Sequence[ReplayReport], description: str | None) -> str:
    first = next((r for r in reports if r.available), reports[0])
    window = f"{first.window:,}" if first.window else "unbounded"
    measured = "exact o200k_base" if first.exact else f"foldwise's {first.counter} counter"
    offloaded = ", ".join(
        f"{_esc(r.label)} {format_bytes(r.offloaded_bytes)}" for r in reports if r.available
    )
    notes = "".join(
        f"<li>{_esc(r.label)}: {_esc(w)}</li>" for r in reports for w in [*r.warnings, r.error] if w
    )
    return (
        f"<section><h2>{_esc(first.trace)}</h2>"
        + (f"<p>{_esc(description)}</p>" if description else "")
        + f"<p class='sub'>{len(first.real_calls):,} model calls · provider window {window} "
        f"(counted with {_esc(first.provider_counter)}) · table tokens measured with "
        f"{_esc(measured)} · offloaded: {offloaded}</p>"
        f"{_chart(reports)}<h3>Side by side</h3>{_summary_table(reports)}"
        f"<h3>Compactions</h3>{''.join(_receipts(r) for r in reports if r.available)}"
        + (f"<details><summary>Notes</summary><ul>{notes}</ul></details>" if notes else "")
        + "</section>"
    )


def render_html_report(
    reports: Sequence[ReplayReport],
    *,
    title: str = "foldwise replay",
    descriptions: Mapping[str, str] | None = None,
) -> str:
    """The report page as a string; reports are grouped by trace, in order.

    Args:
        reports: Replay reports (several systems per trace, several traces).
        title: The page title.
        descriptions: One line per trace name, shown under its heading.
    """
    groups: dict[str, list[ReplayReport]] = {}
    for report in reports:
        groups.setdefault(report.trace, []).append(report)
    systems = {r.system: r.description for r in reports}
    legend = "".join(f"<li><b>{_esc(key)}</b>: {_esc(text)}</li>" for key, text in systems.items())
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(
        _trace_section(group, (descriptions or {}).get(name)) for name, group in groups.items()
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>{_esc(title)}</h1><p class='sub'>Open-loop replay of recorded sessions: the same "
        "recorded answers, tools and extractive summarizer for every system, so only the "
        f"context policies differ. Generated {stamp}.</p>{body}"
        f"<section><h3>Systems</h3><ul>{legend}</ul><p class='note'>Chart: tokens of each "
        "request as the fake provider counted them; circles mark compactions, crosses "
        "requests refused for overflow. Ratios divide foldwise's number by the system's.</p>"
        "</section></main></body></html>\n"
    )


def write_html_report(
    reports: Sequence[ReplayReport],
    path: str | Path,
    *,
    title: str = "foldwise replay",
    descriptions: Mapping[str, str] | None = None,
) -> Path:
    """Write the self-contained report page to `path` (see `render_html_report`); return it."""
    target = Path(path)
    page = render_html_report(reports, title=title, descriptions=descriptions)
    target.write_text(page, encoding="utf-8")
    return target
