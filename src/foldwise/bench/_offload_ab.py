"""Benchmark: the "timeline over a big corpus" session with offload off and on (foldwise both)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OffloadABResult", "run_offload_ab"]


@dataclass
class OffloadABResult:
    """foldwise's full stack on one session, offload off vs on."""

    session: str
    window: int
    trigger: int
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready results."""
        on, off = self.rows["on"], self.rows["off"]
        return {
            "benchmark": "offload_ab",
            "session": self.session,
            "window": self.window,
            "trigger_tokens": self.trigger,
            "off": off,
            "on": on,
            "total_ratio_on_over_off": round(on["total_tokens"] / max(1, off["total_tokens"]), 4),
            "peak_ratio_on_over_off": round(on["peak_tokens"] / max(1, off["peak_tokens"]), 4),
            "seconds": round(self.seconds, 2),
        }

    def to_markdown(self) -> str:
        """A small Markdown table."""
        d = self.to_dict()
        lines = [
            f"Session `{self.session}` through foldwise's full stack, window {self.window:,}, "
            f"trigger {self.trigger:,} tokens:",
            "",
            "| offload | compactions | peak request tokens | total prompt tokens | "
            "overflow 400s | artifacts |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for key in ("off", "on"):
            r = d[key]
            lines.append(
                f"| {key} | {r['compactions']} | {r['peak_tokens']:,} | {r['total_tokens']:,} | "
                f"{r['overflow_rejections']} | {r['offloaded_artifacts']} |"
            )
        lines += [
            "",
            f"total prompt tokens, on / off: **{d['total_ratio_on_over_off']}**; "
            f"peak: **{d['peak_ratio_on_over_off']}**",
        ]
        return "\n".join(lines)


def run_offload_ab(
    *, session: str = "corpus_timeline", window: int = 128_000, trigger: int = 48_000
) -> OffloadABResult:
    """Replay a shipped session twice through foldwise: offload disabled, then enabled.

    Everything else is the default stack with the offline summarizer, so the difference is
    the offload tier alone: real compactions, peak and total prompt tokens, provider refusals.
    """
    from foldwise.config import parse_config
    from foldwise.replay import replay_trace
    from foldwise.replay.sessions import session_trace

    started = time.perf_counter()
    result = OffloadABResult(session=session, window=window, trigger=trigger)
    trace = session_trace(session)
    for key, enabled in (("off", False), ("on", True)):
        config = parse_config(
            {
                "models": [{"name": "run", "context_window": window}],
                "summarization": {"trigger": {"type": "tokens", "value": trigger}},
                "offload": {"enabled": enabled},
            }
        )
        report = replay_trace(trace, config=config, window=window)
        result.rows[key] = report.summary()
    result.seconds = time.perf_counter() - started
    return result
