"""Targets and Markdown of the benchmark suite."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from foldwise.bench._suite import BenchSuiteResult
    from foldwise.bench._suite_metrics import Pricing

__all__ = ["suite_markdown", "targets"]

Results = Mapping[str, Mapping[str, Mapping[str, Any]]]
_LABELS = {
    "foldwise": "foldwise",
    "langchain": "LangChain default",
    "langchain-matched": "LangChain matched",
    "deepagents": "deepagents",
    "raw": "raw ∞",
}
BIG_CORPUS = "corpus_timeline"
"""The big-corpus session of the token target."""


def _ok(rows: Mapping[str, Any], key: str) -> bool:
    return key in rows and "note" not in rows[key]


def _ratio(rows: Mapping[str, Mapping[str, Any]], metric: str, peer: str) -> float | None:
    if not (_ok(rows, "foldwise") and _ok(rows, peer)):
        return None
    denominator = rows[peer].get(metric)
    numerator = rows["foldwise"].get(metric)
    if not denominator or numerator is None:
        return None
    return float(numerator) / float(denominator)


def targets(results: Results) -> list[dict[str, Any]]:
    """The suite's targets: met or not, with the numbers behind the verdict."""
    fw = {k: v["foldwise"] for k, v in results.items() if _ok(v, "foldwise")}
    overflow = {k: v["overflow_rejections"] for k, v in fw.items() if v["overflow_rejections"]}
    humans = {
        k: v["human_verbatim_or_recoverable"]
        for k, v in fw.items()
        if v["human_verbatim_or_recoverable"] < 1
    }
    orphans = {k: v["orphan_tool_messages"] for k, v in fw.items() if v["orphan_tool_messages"]}
    out = [
        {
            "name": "foldwise: zero overflow rejections on every scenario (M1)",
            "met": not overflow,
            "detail": "0 everywhere" if not overflow else f"rejections: {overflow}",
        },
        {
            "name": "foldwise: 100% of human messages verbatim or recoverable (M4)",
            "met": not humans,
            "detail": "100% everywhere" if not humans else f"below 100%: {humans}",
        },
        {
            "name": "foldwise: no orphan tool call or result sent (M4)",
            "met": not orphans,
            "detail": "0 everywhere" if not orphans else f"orphans: {orphans}",
        },
    ]
    ratio = _ratio(results.get(BIG_CORPUS, {}), "total_prompt_tokens", "langchain")
    out.append(
        {
            "name": f"{BIG_CORPUS}: foldwise total prompt tokens <= 0.5x LangChain default",
            "met": ratio is not None and ratio <= 0.5,
            "detail": f"foldwise / LangChain = {ratio:.2f}" if ratio is not None else "not run",
        }
    )
    facts = {k: v["facts"]["present_or_recoverable"] for k, v in fw.items() if "facts" in v}
    low = {k: v for k, v in facts.items() if v < 0.95}
    if facts:
        out.append(
            {
                "name": "foldwise: >= 95% of planted facts present or recoverable (M5)",
                "met": not low,
                "detail": ", ".join(f"{k} {v:.0%}" for k, v in facts.items()),
            }
        )
    return out


def _table(
    results: Results,
    systems: list[str],
    cell: Callable[[Mapping[str, Any]], str],
    *,
    ratio_metric: str | None = None,
) -> list[str]:
    ratio_peers = [p for p in ("langchain", "deepagents") if p in systems] if ratio_metric else []
    head = ["scenario", *(f"foldwise / {_LABELS[p]}" for p in ratio_peers)]
    head += [_LABELS.get(s, s) for s in systems]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for scenario, rows in results.items():
        cells = [scenario]
        for peer in ratio_peers:
            value = _ratio(rows, ratio_metric or "", peer)
            cells.append(f"{value:.2f}" if value is not None else "–")
        for system in systems:
            row = rows.get(system)
            cells.append(cell(row) if row is not None and "note" not in row else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _facts_table(results: Results, systems: list[str]) -> list[str]:
    lines: list[str] = []
    for scenario, rows in results.items():
        if not any("facts" in r for r in rows.values()):
            continue
        categories = next(r["facts"]["by_category"] for r in rows.values() if "facts" in r)
        head = ["system", *categories, "all (present / +recoverable)"]
        lines += [
            f"**{scenario}**",
            "",
            "| " + " | ".join(head) + " |",
            "|---" + "|---:" * (len(head) - 1) + "|",
        ]
        for system in systems:
            row = rows.get(system)
            if row is None or "facts" not in row:
                continue
            facts = row["facts"]
            cells = [_LABELS.get(system, system)]
            cells += [
                f"{v['present']:.0%} / {v['present_or_recoverable']:.0%}"
                for v in facts["by_category"].values()
            ]
            cells.append(f"{facts['present']:.0%} / {facts['present_or_recoverable']:.0%}")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _demote(markdown: str) -> str:
    return "\n".join(
        "##" + line if line.startswith("#") else line for line in markdown.splitlines()
    )


_Section = tuple[str, str | None, Callable[[Mapping[str, Any]], str]]


def _header(result: BenchSuiteResult, notes: Mapping[str, str]) -> list[str]:
    """Title, machine and versions, the targets and the systems that did not run."""
    env = result.environment
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    lines = [
        f"# foldwise bench{' (quick)' if result.quick else ''}",
        "",
        f"{env['cpu_model'] or env['machine']}, {env['nproc']} CPUs, Python {env['python']}; "
        f"{versions}. Provider window {result.window:,} tokens, counted with "
        f"{'exact o200k_base' if env['exact_backend'] else 'the estimate'}; total "
        f"{result.seconds:.0f} s.",
        "",
        "## Targets",
        "",
    ]
    lines += [f"- {'✅' if t['met'] else '❌'} {t['name']}: {t['detail']}" for t in result.targets]
    lines += [f"- {_LABELS.get(s, s)} not run: {n}" for s, n in notes.items()]
    return lines


def _sections(p: Pricing) -> list[_Section]:
    """The M1–M4 tables: title, the metric of the ratio columns (if any), and the cell."""
    return [
        (
            "M1 overflow: requests refused by the provider (calls that failed)",
            None,
            lambda r: f"{r['overflow_rejections']} ({r['failed_calls']})",
        ),
        (
            "M2 compactions (thrash: within 2 calls of the previous one)",
            None,
            lambda r: f"{r['compactions']} ({r['thrash_compactions']})",
        ),
        (
            "M3 total prompt tokens (thousands)",
            "total_prompt_tokens",
            lambda r: f"{r['total_prompt_tokens'] / 1000:,.0f}",
        ),
        (
            f"M3 cost, $ (input ${p.input_per_mtok}/M, cache read {p.cache_read}×, write "
            f"{p.cache_write}×, output ${p.output_per_mtok}/M, summaries included)",
            "cost_usd",
            lambda r: f"{r['cost_usd']:.2f}",
        ),
        (
            f"M3 modelled wall clock, s (prefill {p.prefill_tps:,.0f} tok/s, cached "
            f"{p.cached_tps:,.0f} tok/s, decode {p.decode_tps:,.0f} tok/s)",
            "modelled_seconds",
            lambda r: f"{r['modelled_seconds']:,.0f}",
        ),
        (
            "M4 human messages verbatim / + recoverable (orphan tool messages)",
            None,
            lambda r: (
                f"{r['human_verbatim']:.0%} / {r['human_verbatim_or_recoverable']:.0%} "
                f"({r['orphan_tool_messages']})"
            ),
        ),
    ]


def suite_markdown(result: BenchSuiteResult) -> str:
    """The whole suite as Markdown."""
    systems = list(dict.fromkeys(s for rows in result.results.values() for s in rows))
    notes = {
        s: r["note"] for rows in result.results.values() for s, r in rows.items() if "note" in r
    }
    lines = _header(result, notes)
    for title, metric, cell in _sections(result.pricing):
        lines += ["", f"## {title}", ""]
        lines += _table(result.results, systems, cell, ratio_metric=metric)
    lines += [
        "",
        "## M5 planted facts: present in the last request / + recoverable",
        "",
        "Six facts per depth 0–90%; `plan` is the newest next-step plan only (older plans are "
        "superseded, so forgetting them is correct).",
        "",
    ]
    lines += _facts_table(result.results, systems)
    lines += ["## Scenarios", ""]
    lines += [
        f"- `{k}`: {v['title']}; {v['calls']} model calls" for k, v in result.scenarios.items()
    ]
    for key, markdown in result.counting_markdown.items():
        lines += ["", f"## T0 counting: {key}", "", _demote(markdown)]
    return "\n".join(lines).rstrip() + "\n"
