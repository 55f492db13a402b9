"""Terminal renderings of replay reports: plain text with a sparkline, and a rich table.

Nothing here prints: the CLI prints what these functions return.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from foldwise.replay._report import ReplayReport

__all__ = [
    "comparison_rows",
    "format_bytes",
    "format_receipts",
    "format_summary",
    "sparkline",
    "summary_table",
]

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[int], *, width: int = 40, top: int | None = None) -> str:
    """Values as a line of block characters (the maximum of each bucket), scaled to `top`."""
    if not values:
        return ""
    top = top or max(values) or 1
    buckets = min(width, len(values))
    out: list[str] = []
    for bucket in range(buckets):
        lo = bucket * len(values) // buckets
        hi = max(lo + 1, (bucket + 1) * len(values) // buckets)
        peak = max(values[lo:hi])
        level = min(len(_BARS) - 1, int(peak / top * (len(_BARS) - 1) + 0.5))
        out.append(_BARS[level])
    return "".join(out)


def format_bytes(size: int) -> str:
    """`1.2 MB`-style size."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%" if value < 0.995 or value == 1 else f"{value * 100:.1f}%"


def _ratio(base: int, other: int) -> str:
    return f"{base / other:.2f}×" if other else "–"


def comparison_rows(reports: Sequence[ReplayReport]) -> list[dict[str, str]]:
    """One row of display strings per system; `vs foldwise` is foldwise's total ÷ the system's."""
    base = next((r for r in reports if r.system == "foldwise"), None)
    top = max((r.peak_tokens for r in reports if r.available), default=1)
    rows: list[dict[str, str]] = []
    for report in reports:
        if not report.available:
            rows.append({"system": report.label, "note": report.note or "not run"})
            continue
        rows.append(
            {
                "system": report.label,
                "calls": f"{len(report.real_calls):,}",
                "compactions": f"{report.compaction_count:,}",
                "peak": f"{report.peak_tokens:,}",
                "total": f"{report.total_tokens:,}",
                "foldwise_ratio": _ratio(base.total_tokens, report.total_tokens) if base else "–",
                "human_verbatim": _pct(report.human_verbatim),
                "human_kept": _pct(report.human_kept),
                "offloaded": format_bytes(report.offloaded_bytes),
                "rejections": f"{report.rejections:,}",
                "failed": f"{report.failures:,}",
                "context": sparkline([c.measured for c in report.real_calls], top=top),
                "note": report.error or "",
            }
        )
    return rows


_COLUMNS = (
    ("system", "system"),
    ("compactions", "compactions"),
    ("peak", "peak tokens"),
    ("total", "total prompt tokens"),
    ("foldwise_ratio", "foldwise ÷ it"),
    ("human_verbatim", "human verbatim"),
    ("human_kept", "+ recoverable"),
    ("offloaded", "offloaded"),
    ("rejections", "overflow 400s"),
    ("context", "context per call"),
)


def _headline(reports: Sequence[ReplayReport]) -> str:
    first = next((r for r in reports if r.available), reports[0])
    window = f"{first.window:,}" if first.window else "unbounded"
    counted = "exact o200k_base" if first.exact else f"the {first.counter} counter"
    return (
        f"Replay of {first.trace}: {len(first.real_calls):,} model calls, window {window} "
        f"(provider counts with {first.provider_counter}); tokens measured with {counted}"
    )


def format_summary(reports: Sequence[ReplayReport] | ReplayReport) -> str:
    """A plain-text summary: one line per system, then foldwise's compactions."""
    items = [reports] if isinstance(reports, ReplayReport) else list(reports)
    if not items:
        return "nothing was replayed"
    rows = comparison_rows(items)
    widths = {
        key: max([len(title), *(len(r.get(key, "")) for r in rows if "calls" in r)])
        for key, title in _COLUMNS
    }
    lines = [_headline(items), ""]
    lines.append("  ".join(title.ljust(widths[key]) for key, title in _COLUMNS).rstrip())
    for row in rows:
        if "calls" not in row:
            lines.append(f"{row['system'].ljust(widths['system'])}  (not run: {row['note']})")
            continue
        line = "  ".join(row[key].ljust(widths[key]) for key, _ in _COLUMNS).rstrip()
        lines.append(line + (f"  ! {row['note']}" if row["note"] else ""))
    for report in items:
        if report.system == "foldwise" and report.available:
            lines.extend(["", *format_receipts(report)])
    return "\n".join(lines)


def format_receipts(report: ReplayReport, *, limit: int = 20) -> list[str]:
    """One line per compaction of `report` (the first `limit`)."""
    events = report.compactions
    if not events:
        return [f"{report.label}: no compaction"]
    lines = [f"{report.label}: {len(events)} compaction(s)"]
    for event in events[:limit]:
        sizes = ""
        if event.tokens_before is not None and event.tokens_after is not None:
            sizes = f" {event.tokens_before:,} → {event.tokens_after:,} tokens,"
        kept = f", kept {event.messages_preserved}" if event.messages_preserved is not None else ""
        lines.append(
            f"  before call {event.call}: [{event.trigger}]{sizes} removed "
            f"{event.messages_removed}{kept}; {event.reason}"
        )
    if len(events) > limit:
        lines.append(f"  … {len(events) - limit} more")
    return lines


def summary_table(reports: Sequence[ReplayReport], *, title: str | None = None) -> Table:
    """The comparison as a `rich` table (for the CLI to print)."""
    table = Table(title=title or (_headline(reports) if reports else None), title_justify="left")
    for key, heading in _COLUMNS:
        left = key in ("system", "context")
        table.add_column(heading, justify="left" if left else "right", no_wrap=key == "context")
    for row, report in zip(comparison_rows(reports), reports, strict=True):
        if "calls" not in row:
            table.add_row(row["system"], Text(f"not run: {row['note']}", style="dim"))
            continue
        cells: list[str | Text] = [row[key] for key, _ in _COLUMNS]
        if report.rejections:
            cells[8] = Text(row["rejections"], style="bold red")
        if report.system == "foldwise":
            cells[0] = Text(row["system"], style="bold green")
        table.add_row(*cells)
    return table
