"""`run_demo`: the shipped example sessions replayed through foldwise and LangChain's default."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foldwise.config import FoldwiseConfig, ModelConfig
from foldwise.replay._api import ReplayComparison, compare_trace
from foldwise.replay._html import write_html_report
from foldwise.replay._render import format_bytes
from foldwise.replay.sessions import SESSION_NAMES, SESSION_TITLES, session_trace
from foldwise.tokens import exact_backend

__all__ = ["DEMO_WINDOW", "DemoResult", "demo_config", "run_demo"]

logger = logging.getLogger(__name__)

DEMO_WINDOW = 128_000
"""Context window of the demo's model (a common size: gpt-4o-mini, DeepSeek, Qwen)."""


def demo_config(window: int = DEMO_WINDOW) -> FoldwiseConfig:
    """foldwise's defaults with one model of `window` tokens (nothing else is tuned)."""
    return FoldwiseConfig(models=[ModelConfig(name="demo-model", context_window=window)])


_HEAD = (
    ("session", "session"),
    ("system", "system"),
    ("calls", "calls"),
    ("compactions", "compactions"),
    ("peak", "peak tokens"),
    ("total", "total prompt tokens"),
    ("ratio", "foldwise ÷ it"),
    ("human", "user input kept"),
    ("offloaded", "offloaded"),
    ("overflows", "overflow 400s"),
)


@dataclass
class DemoResult:
    """The demo's comparisons; `str()` is the printable table.

    Attributes:
        comparisons: One per session: foldwise's report first, then the peers'.
        html_path: Where the HTML report was written, if it was.
        seconds: Wall time of the whole demo.
    """

    comparisons: list[ReplayComparison] = field(default_factory=list)
    html_path: Path | None = None
    seconds: float = 0.0

    def rows(self) -> list[dict[str, str]]:
        """One display row per (session, system)."""
        rows: list[dict[str, str]] = []
        for comparison in self.comparisons:
            base = comparison.foldwise
            for report in comparison.reports:
                if not report.available:
                    continue
                ratio = (
                    f"{base.total_tokens / report.total_tokens:.2f}×"
                    if report.total_tokens
                    else "–"
                )
                rows.append(
                    {
                        "session": comparison.trace,
                        "system": report.label,
                        "calls": f"{len(report.real_calls)}",
                        "compactions": f"{report.compaction_count}",
                        "peak": f"{report.peak_tokens:,}",
                        "total": f"{report.total_tokens:,}",
                        "ratio": ratio,
                        "human": f"{report.human_kept * 100:.0f}%",
                        "offloaded": format_bytes(report.offloaded_bytes),
                        "overflows": f"{report.rejections}",
                    }
                )
        return rows

    def to_markdown(self) -> str:
        """The table in Markdown."""
        lines = [
            "| " + " | ".join(title for _, title in _HEAD) + " |",
            "|" + "|".join("---" for _ in _HEAD) + "|",
        ]
        lines.extend("| " + " | ".join(r[key] for key, _ in _HEAD) + " |" for r in self.rows())
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        rows = self.rows()
        widths = {k: max([len(t), *(len(r[k]) for r in rows)]) for k, t in _HEAD}
        lines = ["  ".join(t.ljust(widths[k]) for k, t in _HEAD).rstrip()]
        previous = None
        for row in rows:
            if previous is not None and row["session"] != previous:
                lines.append("")
            previous = row["session"]
            lines.append("  ".join(row[k].ljust(widths[k]) for k, _ in _HEAD).rstrip())
        footer = [
            "",
            "user input kept: share of (call, earlier user message) pairs where the message was "
            "sent verbatim or could be read back from the store.",
            "foldwise ÷ it: foldwise's total prompt tokens divided by the system's.",
        ]
        if self.html_path is not None:
            footer.append(f"report: {self.html_path}")
        footer.append(f"replayed offline in {self.seconds:.1f} s")
        return "\n".join(lines + footer)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "seconds": round(self.seconds, 2),
            "html": str(self.html_path) if self.html_path else None,
            "sessions": [c.to_dict() for c in self.comparisons],
        }


def run_demo(
    out_html: str | Path | None = "demo-report.html",
    *,
    quick: bool = False,
    peers: Sequence[str] = ("langchain",),
    sessions: Sequence[str] | None = None,
    config: FoldwiseConfig | None = None,
) -> DemoResult:
    """Replay the shipped example sessions through foldwise and its peers, offline.

    Args:
        out_html: Where to write the HTML report; `None` writes none.
        quick: Smaller tool outputs (for tests; the numbers are not the demo's).
        peers: Peers next to foldwise (default: LangChain's `SummarizationMiddleware`).
        sessions: Session names (default: all of `foldwise.replay.sessions.SESSION_NAMES`).
        config: foldwise's configuration (default: `demo_config()`, i.e. the defaults with a
            128k-token model).

    Request sizes are measured with the exact `o200k_base` tokenizer when the optional
    tokenizers are installed (as `make demo` installs them), else with foldwise's estimate.

    Returns:
        The comparison per session; `str(result)` is the table the CLI prints.
    """
    started = time.perf_counter()
    config = config or demo_config()
    exact = exact_backend() is not None
    result = DemoResult()
    for name in sessions or SESSION_NAMES:
        logger.info("demo: replaying %s", name)
        trace = session_trace(name, quick=quick)
        result.comparisons.append(compare_trace(trace, config=config, peers=peers, exact=exact))
    if out_html is not None:
        reports = [r for c in result.comparisons for r in c.reports]
        result.html_path = write_html_report(
            reports, out_html, title="foldwise demo", descriptions=SESSION_TITLES
        )
    result.seconds = time.perf_counter() - started
    return result
