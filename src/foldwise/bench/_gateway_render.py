"""The Markdown table, the ratios and the target checks of `foldwise bench gateway`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from foldwise.bench._gateway_measure import ColumnResult, paired_growth

if TYPE_CHECKING:
    from foldwise.bench._gateway_bench import GatewayBenchReport

__all__ = ["GROWTH_ERRORS", "GROWTH_RESOLUTION", "TARGETS", "checks", "ratios", "render_markdown"]

TARGETS = {"p50": 14.0, "p99": 25.0, "rps": 80.0, "growth_fallback": 0.3}
"""Issue 16: create + wait p50 ≤ 14 ms, p99 ≤ 25 ms, ≥ 80 requests/s (and none failed); growth
per turn no steeper than LangGraph's (0.3 ms/turn when LangGraph could not be measured); RSS
flat."""
GROWTH_ERRORS = 2.0
"""Growth "no steeper than LangGraph's": the paired difference of the slopes (foldwise minus
LangGraph, turn by turn) may exceed zero by at most this many of its standard errors, i.e. it
fails only when foldwise grows measurably faster (one-sided, about 98 %)."""
GROWTH_RESOLUTION = 0.1
"""A pass needs the paired difference known this finely: `GROWTH_ERRORS` standard errors at
most this share of LangGraph's slope; a noisier run (or `--quick`) reads n/a, not pass."""

_FAST, _FOLDWISE = "LangGraph, poll 5 ms", ("foldwise (SQLite)", "foldwise (PostgreSQL)")
Metric = Callable[[ColumnResult], float]
_ROWS: list[tuple[str, Metric, str]] = [
    ("create thread + runs.wait p50 (ms)", lambda c: c.create_wait_p50, "{:.1f}"),
    ("create thread + runs.wait p99 (ms)", lambda c: c.create_wait_p99, "{:.1f}"),
    ("growing threads, turns {window} p50 (ms)", lambda c: c.turns_p50, "{:.1f}"),
    ("growth per turn, fitted (ms/turn)", lambda c: c.growth_ms_per_turn, "{:+.3f}"),
    ("{clients} clients x {seconds} s, requests/s", lambda c: c.requests_per_second, "{:.1f}"),
    ("runs.stream first event p50 (ms)", lambda c: c.stream_first_event_p50, "{:.1f}"),
    ("RSS after load (MiB)", lambda c: c.rss_after_mib, "{:.0f}"),
    ("RSS growth during load (MiB)", lambda c: c.rss_growth_mib, "{:+.1f}"),
]


def ratios(report: GatewayBenchReport) -> dict[str, dict[str, float]]:
    """Per foldwise column, each metric divided by LangGraph-5ms's (empty without it)."""
    base = report.column(_FAST)
    found: dict[str, dict[str, float]] = {}
    for label in _FOLDWISE:
        column = report.column(label)
        if base is None or column is None:
            continue
        found[label] = {}
        for name, metric, _ in _ROWS[:6]:
            if metric(base):
                found[label][_name(name, column, report)] = round(metric(column) / metric(base), 3)
    return found


def _name(template: str, column: ColumnResult, report: GatewayBenchReport | None = None) -> str:
    sizes = report.sizes if report is not None else {}
    return template.format(
        window=column.turns_window or "?",
        clients=sizes.get("clients", "N"),
        seconds=sizes.get("seconds", "S"),
    )


def checks(report: GatewayBenchReport) -> list[tuple[str, str, bool | None]]:
    """``(check, measured value, passed)`` for every foldwise column and target."""
    base = report.column(_FAST)
    found: list[tuple[str, str, bool | None]] = []
    for label in _FOLDWISE:
        c = report.column(label)
        if c is None:
            continue
        found += [
            (f"{label}: p50 ≤ 14 ms", f"{c.create_wait_p50:.1f} ms", c.create_wait_p50 <= 14),
            (f"{label}: p99 ≤ 25 ms", f"{c.create_wait_p99:.1f} ms", c.create_wait_p99 <= 25),
            (
                f"{label}: ≥ 80 requests/s",
                f"{c.requests_per_second:.1f}/s",
                c.requests_per_second >= TARGETS["rps"],
            ),
            (  # requests/s counts answered requests only: a failed one must not pass unseen
                f"{label}: no errors under load",
                f"{c.concurrent_errors} of {c.concurrent_requests + c.concurrent_errors} requests",
                c.concurrent_errors == 0,
            ),
            _growth_check(label, c, base),
            (
                f"{label}: RSS flat under load",
                f"{c.rss_growth_mib:+.1f} MiB over {c.rss_samples} samples",
                c.rss_flat if c.rss_samples >= 3 else None,
            ),
        ]
    return found


def _growth_check(
    label: str, column: ColumnResult, base: ColumnResult | None
) -> tuple[str, str, bool | None]:
    """Growth against LangGraph-5ms's in this run (paired), else against issue 16's 0.3."""
    paired = paired_growth(column.turn_latencies, base.turn_latencies) if base else None
    if base is None or paired is None:
        limit = TARGETS["growth_fallback"] if base is None else base.growth_ms_per_turn
        source = "issue 16's 0.3, no LangGraph" if base is None else "LangGraph-5ms in this run"
        return (
            f"{label}: growth ≤ {limit:+.3f} ms/turn ({source})",
            f"{column.growth_ms_per_turn:+.3f} ms/turn",
            column.growth_ms_per_turn <= max(limit, 0.0),
        )
    return (
        f"{label}: growth no steeper than LangGraph-5ms's in this run (paired difference ≤ "
        f"{GROWTH_ERRORS:g} standard errors)",
        f"{paired.slope:+.3f} ± {paired.standard_error:.3f} ms/turn "
        f"({column.growth_ms_per_turn:+.3f} vs {base.growth_ms_per_turn:+.3f})",
        _growth_verdict(paired.slope, paired.standard_error, base.growth_ms_per_turn),
    )


def _growth_verdict(difference: float, error: float, base_slope: float) -> bool | None:
    """False when measurably steeper; None when too imprecise to say it is not; else True."""
    margin = GROWTH_ERRORS * error
    if difference > margin:
        return False
    return None if margin > GROWTH_RESOLUTION * base_slope else True


def _table(report: GatewayBenchReport) -> list[str]:
    labels = [c.label for c in report.columns]
    missing = list(report.unavailable)
    heads = [*missing, *labels]
    base, fw = report.column(_FAST), report.column(_FOLDWISE[0])
    lines = [
        "| metric | " + " | ".join(heads) + " | foldwise (SQLite) / LangGraph 5 ms |",
        "|---|" + "---:|" * (len(heads) + 1),
    ]
    for template, metric, fmt in _ROWS:
        name = _name(template, report.columns[0], report) if report.columns else template
        cells = ["unavailable"] * len(missing) + [fmt.format(metric(c)) for c in report.columns]
        ratio = "—"
        if base is not None and fw is not None and metric(base) and template in _RATIO_ROWS:
            ratio = f"{metric(fw) / metric(base):.2f}"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    return lines


_RATIO_ROWS = {template for template, _, _ in _ROWS[:6]}


def _turns(column: ColumnResult) -> str:
    """``200`` for one growing thread, ``3 x 200`` for three."""
    lengths = [len(series) for series in column.turn_latencies]
    if len(lengths) == 1:
        return str(lengths[0])
    return f"{len(lengths)} x {max(lengths, default=0)}"


def render_markdown(report: GatewayBenchReport) -> str:
    """The report as Markdown: the table, the unavailable columns, the checks, the notes."""
    lines = ["## foldwise bench gateway", "", *_table(report), ""]
    if report.unavailable:
        lines += [f"- {label}: unavailable: {r}" for label, r in report.unavailable.items()]
        lines.append("")
    lines += ["| target | measured | result |", "|---|---:|---|"]
    for name, value, ok in checks(report):
        verdict = "pass" if ok else ("n/a" if ok is None else "**FAIL**")
        lines.append(f"| {name} | {value} | {verdict} |")
    lines.append("")
    for column in report.columns:
        lines.append(
            f"- {column.label}: {column.sequential_samples} sequential pairs, "
            f"{_turns(column)} turns, {column.concurrent_requests} concurrent "
            f"requests ({column.concurrent_errors} errors, p50 {column.concurrent_p50:.1f} ms), "
            f"{column.stream_samples} streams, {column.rss_samples} RSS samples."
        )
    lines += [f"- {note}" for note in report.notes]
    loads = "; ".join(f"{k} {v[0]:.2f}" for k, v in report.load_average.items())
    lines.append(f"- load average (1 min): {loads}")
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    lines.append(f"- versions: {versions}")
    return "\n".join(lines) + "\n"
