"""Open-loop replay: feed a trace's turns to a real agent whose model plays the recorded answers."""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from foldwise.config import FoldwiseConfig
from foldwise.messages import message_text
from foldwise.middleware.summarization import is_context_overflow
from foldwise.replay._collect import collect_calls
from foldwise.replay._model import ProviderAttempt, ReplayChatModel, default_provider_counter
from foldwise.replay._probe import ReplayProbe, RequestSnapshot, SummaryTap
from foldwise.replay._report import ReplayReport
from foldwise.replay._systems import BuildContext, ReplaySystem, replay_config
from foldwise.replay._tools import ResultBook, recorded_tools
from foldwise.replay._trace import Trace
from foldwise.tokens import TokenCounter, get_counter

__all__ = ["DEFAULT_WINDOW", "Analyzer", "Finished", "Turn", "replay_system", "split_turns"]

logger = logging.getLogger(__name__)

DEFAULT_WINDOW = 128_000
"""Provider window used when neither the caller nor the config's first model gives one."""
_RECURSION_LIMIT = 10_000
_M = TypeVar("_M", bound=BaseMessage)


@dataclass(frozen=True)
class Finished:
    """A finished replay run, for analyzers.

    Attributes:
        snapshots: Every request as the model received it (rejected ones included).
        attempts: The provider's verdict on each, in the same order.
        final_state: The agent's state at the end.
        system: The system replayed.
        ctx: What it was built from (model, store directory, thread id...).
    """

    snapshots: Sequence[RequestSnapshot]
    attempts: Sequence[ProviderAttempt]
    final_state: dict[str, Any]
    system: ReplaySystem
    ctx: BuildContext


Analyzer = Callable[[Finished], dict[str, Any]]
"""An extra measurement of a finished replay run."""


@dataclass
class Turn:
    """What the user sent, and the assistant's recorded answers until the user spoke again.

    Attributes:
        inputs: Human (and mid-trace system) messages opening the turn.
        answers: The recorded assistant messages of the turn, in order.
        humans: `(id, text)` of the turn's human messages.
    """

    inputs: list[BaseMessage] = field(default_factory=list)
    answers: list[AIMessage] = field(default_factory=list)
    humans: list[tuple[str, str]] = field(default_factory=list)


def split_turns(trace: Trace) -> tuple[list[Turn], dict[str, ToolMessage], list[str]]:
    """Cut a trace into turns; collect the tool results by `tool_call_id`.

    Returns:
        The turns, the recorded tool results, and warnings (results whose call is missing).
    """
    messages = list(trace.messages)
    start = 0
    while start < len(messages) and isinstance(messages[start], SystemMessage):
        start += 1
    turns: list[Turn] = []
    results: dict[str, ToolMessage] = {}
    warnings: list[str] = []
    called: set[str] = set()
    current: Turn | None = None
    for message in messages[start:]:
        if isinstance(message, AIMessage):
            if current is None:
                current = Turn()
                turns.append(current)
            current.answers.append(message)
            called.update(str(c["id"]) for c in message.tool_calls)
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in called:
                warnings.append(
                    f"tool result {message.id} answers unknown call {message.tool_call_id}; skipped"
                )
                continue
            results[message.tool_call_id] = message
        else:
            if current is None or current.answers:
                current = Turn()
                turns.append(current)
            current.inputs.append(message)
            if isinstance(message, HumanMessage):
                current.humans.append((str(message.id), message_text(message)))
    return turns, results, warnings


def _tagged(message: _M, tag: str) -> _M:
    copy = message.model_copy(deep=True)
    copy.id = f"{message.id}@{tag}"
    if isinstance(copy, AIMessage):
        copy.usage_metadata = None
    return copy


def _run_turn(
    agent: Any, model: ReplayChatModel, payload: dict[str, Any], config: dict[str, Any]
) -> None:
    """Invoke until the turn's recorded answers are played, forcing through overflow failures."""
    current: dict[str, Any] | None = payload
    while True:
        try:
            agent.invoke(current, config)
        except Exception as err:
            last = model.attempts[-1] if model.attempts else None
            if last is None or not last.rejected or not is_context_overflow(err):
                raise
            # The system let the overflow reach the caller: in production the run fails here.
            # Let the same request through and resume the interrupted step to go on replaying.
            model.force_next()
            current = None
            continue
        if not model.pending:
            return
        current = {"messages": []}  # consecutive recorded answers: call the model again


@dataclass(frozen=True)
class _Run:
    """One replay's inputs, resolved: what `replay_system` hands to `_drive`."""

    trace: Trace
    system: ReplaySystem
    config: FoldwiseConfig
    window: int
    summarizer: str | None
    provider: TokenCounter
    counter: TokenCounter
    exact_counter: TokenCounter | None
    analyzers: Sequence[Analyzer]


def replay_system(
    trace: Trace,
    system: ReplaySystem,
    *,
    config: FoldwiseConfig | None = None,
    window: int | None = None,
    exact: bool = False,
    summarizer: str | None = "extractive",
    provider_counter: TokenCounter | None = None,
    analyzers: Sequence[Analyzer] = (),
) -> ReplayReport:
    """Replay `trace` through one system and measure every model call.

    Args:
        trace: The recorded session.
        system: foldwise or a peer (`foldwise.replay.get_system`).
        config: foldwise's configuration (defaults when omitted).
        window: The provider's context window (default: the config's first model's, else
            `DEFAULT_WINDOW`).
        exact: Also count every request with the exact `o200k_base` tokenizer.
        summarizer: Summarizer for foldwise (`summarization.model_name`); the default
            `extractive` keeps replay offline. `None` keeps the config's.
        provider_counter: How the fake provider counts (default: exact when installed).
        analyzers: Extra measurements run on the finished replay; each returns a dict merged
            into `report.extras`.
    """
    config = config or FoldwiseConfig()
    entry = config.model()
    run = _Run(
        trace=trace,
        system=system,
        config=config,
        window=window or (entry.context_window if entry else None) or DEFAULT_WINDOW,
        summarizer=summarizer,
        provider=provider_counter or default_provider_counter(),
        counter=get_counter(None, config=config),
        exact_counter=get_counter("o200k_base") if exact else None,
        analyzers=analyzers,
    )
    report = _empty_report(run)
    note = system.unavailable()
    if note is not None:
        report.note = note
        return report
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="foldwise-replay-") as tmp:
        _drive(run, report, Path(tmp))
    report.duration_seconds = time.perf_counter() - started
    return report


def _empty_report(run: _Run) -> ReplayReport:
    """The report's header: what is replayed, through what, counted how."""
    return ReplayReport(
        system=run.system.key,
        label=run.system.label,
        description=run.system.description,
        trace=run.trace.name,
        counter=run.counter.name,
        exact=run.exact_counter is not None,
        provider_counter=run.provider.name,
        window=run.window if run.system.window_limited else None,
        warnings=list(run.trace.warnings),
    )


def _build_context(run: _Run, workdir: Path, book: ResultBook) -> BuildContext:
    """The fake provider, recorded tools, probe and tap one system is built from."""
    model = ReplayChatModel(
        window=run.window if run.system.window_limited else None,
        provider_counter=run.provider,
        profile={"max_input_tokens": run.window},
    )
    probe = ReplayProbe()
    return BuildContext(
        model=model,
        tools=recorded_tools(run.trace.messages, run.trace.tools, book),
        system_prompt=run.trace.system_prompt,
        checkpointer=InMemorySaver(),
        probe=probe,
        tap=SummaryTap(probe, run.counter),
        config=replay_config(run.config, workdir, summarizer=run.summarizer),
        workdir=workdir,
        # Fixed: artifact ids derive from the thread, and replays should be repeatable. Every
        # run has its own checkpointer and store; message ids carry the run's `tag` instead.
        thread_id="replay",
    )


def _play(
    agent: Any,
    ctx: BuildContext,
    turns: Sequence[Turn],
    *,
    tag: str,
    invoke_config: dict[str, Any],
    turn_starts: list[int],
) -> None:
    """Play every turn through `agent`, appending the request index each turn starts at.

    `turn_starts` is filled as the turns go, so it is right up to a turn that raises.
    """
    for turn in turns:
        turn_starts.append(len(ctx.probe.snapshots))
        ctx.model.load_turn([_tagged(a, tag) for a in turn.answers])
        inputs = [_tagged(m, tag) for m in turn.inputs]
        _run_turn(agent, ctx.model, {"messages": inputs}, invoke_config)


def _final_state(agent: Any, invoke_config: dict[str, Any], key: str) -> dict[str, Any]:
    try:
        return dict(agent.get_state(invoke_config).values)
    except Exception:
        logger.exception("replay: cannot read the final state of %s", key)
        return {}


def _analyze(analyzers: Sequence[Analyzer], finished: Finished, report: ReplayReport) -> None:
    """Merge each analyzer's output into `report.extras`; a failing one becomes a warning."""
    for analyze in analyzers:
        try:
            report.extras.update(analyze(finished))
        except Exception as err:
            logger.exception("replay: analyzer %r failed", analyze)
            report.warnings.append(f"analyzer failed: {type(err).__name__}: {err}")


def _drive(run: _Run, report: ReplayReport, workdir: Path) -> None:
    """Build the system, play the trace through it and fill `report`."""
    tag = uuid.uuid4().hex[:10]
    turns, results, warnings = split_turns(run.trace)
    report.warnings.extend(warnings)
    book = ResultBook(results, tag=tag)
    ctx = _build_context(run, workdir, book)
    agent = run.system.build(ctx)
    invoke_config: dict[str, Any] = {
        "configurable": {"thread_id": ctx.thread_id},
        "recursion_limit": _RECURSION_LIMIT,
        "callbacks": run.system.invoke_callbacks(ctx),
    }
    turn_starts: list[int] = []
    try:
        _play(agent, ctx, turns, tag=tag, invoke_config=invoke_config, turn_starts=turn_starts)
    except Exception as err:
        logger.exception("replay of %s through %s stopped", run.trace.name, run.system.key)
        report.error = f"{type(err).__name__}: {err}"
    final_state = _final_state(agent, invoke_config, run.system.key)
    if book.missing:
        report.warnings.append(
            f"{len(book.missing)} tool call(s) had no recorded result; a placeholder was sent"
        )
    collect_calls(
        report,
        system=run.system,
        ctx=ctx,
        turns=turns,
        turn_starts=turn_starts,
        counter=run.counter,
        exact_counter=run.exact_counter,
        final_state=final_state,
    )
    finished = Finished(ctx.probe.snapshots, ctx.model.attempts, final_state, run.system, ctx)
    _analyze(run.analyzers, finished, report)
