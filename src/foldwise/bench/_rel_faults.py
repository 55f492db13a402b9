"""Reliability area `faults`: faults of the world, each with its expected outcome written down.

Issue 15 item 2. Real `foldwise serve` subprocesses run `langchain_openai:ChatOpenAI` against
the OpenAI stub (`foldwise.bench._openai_stub`), and every case below is tried on its own
thread; the reply is judged against the case's expectation and the thread against the
invariants (docs/reliability.md): I1/I1b the transcript holds every accepted input and every
state message, I2 tool-call pairing, I3 receipts = state compactions = transcript markers, I4
the thread accepts a new run, and "unchanged": a failed run leaves the state as it was plus,
at most, its own input message (LangGraph records the input before the model is called; it is
in the transcript too). Every error body must name the cause and carry no traceback.

Rows: the model and summarizer faults (one server, SQLite, plus a second server under a file-size
limit with no summarizer fallback), the locked SQLite file, the full disk and, in the full form
with a PostgreSQL URL, a PostgreSQL restart mid-run (printed as a clear log line: other suites
may share the server). The full form repeats the model faults for three seeds.
"""

from __future__ import annotations

import contextlib
import functools
import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from foldwise.bench._openai_stub import OpenAIStub
from foldwise.bench._rel_faults_model import (
    MODEL_TIMEOUT,
    CaseRun,
    model_faults,
    overflow_case,
    summarizer_hang_case,
)
from foldwise.bench._rel_faults_stack import Brain, Served, Thread, launch, model_entries
from foldwise.bench._rel_faults_world import (
    BUSY_TIMEOUT,
    disk_full_cases,
    postgres_restart_case,
    sqlite_locked_case,
)
from foldwise.bench._reliability import AreaOptions, AreaResult, Finding, area_command

__all__ = ["CASES", "run"]

_FAILS = "fails: the error names the cause, no traceback; state unchanged; thread usable; I1-I3"
CASES: dict[str, str] = {
    "model times out": f"500 `run … failed: OpenAITimeoutError` after the client timeout; {_FAILS}",
    "model answers 429": f"500 naming the provider's 429 (rate limit); {_FAILS}",
    "model answers 500": f"500 naming the provider's 500; {_FAILS}",
    "model answers invalid JSON": f"500 naming the model step and the JSON error; {_FAILS}",
    "model answers the wrong shape": f"500 naming the model step; {_FAILS}",
    "model answers an empty body": f"500 naming the model step and the JSON error; {_FAILS}",
    "model answers an empty message": "200: an empty answer is an answer; I1-I4",
    "model stream drops mid-answer": (
        f"SSE `error` event (502 `ModelResponseError`: cut off), no truncated answer kept; {_FAILS}"
    ),
    "model stream drops mid-tool-call": (
        "SSE `error` event (502 `ModelResponseError`), the half-sent tool call never runs; "
        + _FAILS
    ),
    "model connection drops mid-answer": f"500 naming the connection error; {_FAILS}",
    "model overflows its window, estimate 3x the provider's": (
        "full form: the same with synthetic words foldwise's estimate counts ~3x the "
        "provider's count; every turn 200"
    ),
    "model overflows its window": (
        "every turn 200: the provider's 400 context_length_exceeded is read (window and count), "
        "the thread is compacted (receipt trigger `overflow`) and the call retried; I1-I4"
    ),
    "summarizer hangs, extractive fallback": (
        "manual /compact 200 after `summarization.timeout_seconds`, receipt model_used "
        "`extractive`; I1-I4"
    ),
    "summarizer hangs, no fallback": (
        "manual /compact 502 `SummaryGenerationError` naming the timeout; no receipt, no marker, "
        "state unchanged; thread usable"
    ),
    "SQLite locked by another process": (
        "a write lock held past the 5 s busy timeout: 503 naming the lock, with Retry-After; "
        "state unchanged; the thread takes a new run once the lock is gone"
    ),
    "disk full: tool output to store": (
        "200: the artifact write fails (EFBIG), the tool result is clipped inline instead, no "
        "partial file left; I1-I4"
    ),
    "disk full: pasted input to store": (
        "200: the paste cannot be stored, it stays verbatim in the context; I1-I4"
    ),
    "PostgreSQL restarted mid-run": (
        "the in-flight run answers 200 or a clear 5xx (storage/connection), never hangs; the "
        "server is back; the thread takes a new run; I1-I3 (full form only)"
    ),
}
"""Case -> the outcome it must have (what `run` checks; printed in the report)."""

SUMMARY_TIMEOUT = 1.0
FILE_SIZE_LIMIT = 256 * 1024
"""`RLIMIT_FSIZE` of the disk-full server: every artifact above it fails with EFBIG."""


def _config(
    stub: OpenAIStub, storage: str, root: Path, *, fallback: bool, model_timeout: float
) -> dict[str, object]:
    return {
        "models": model_entries(stub.url, timeout=model_timeout),
        "tools": [{"use": "foldwise.bench._rel_faults_stack:fetch_report"}],
        "summarization": {
            "model_name": "summ",
            "fallback": "extractive" if fallback else None,
            "timeout_seconds": SUMMARY_TIMEOUT,
            "trigger": {"type": "tokens", "value": 100000},
            "keep": {"type": "messages", "value": 2},
        },
        "offload": {"root": str(root)},
        "storage": {"url": storage},
    }


def _launch(stub: OpenAIStub, workdir: Path, name: str, storage: str, **options: Any) -> Served:
    fallback = bool(options.pop("fallback", True))
    timeout = float(options.pop("model_timeout", MODEL_TIMEOUT))
    root = workdir / name / "artifacts"
    config = _config(stub, storage, root, fallback=fallback, model_timeout=timeout)
    return launch(config, workdir / name, name=name, **options)


@contextlib.contextmanager
def _clients(*servers: Served) -> Iterator[list[Callable[[], Thread]]]:
    """One thread factory per server (each on its own HTTP client); stops the servers."""
    with ExitStack() as stack:
        for served in servers:
            stack.callback(served.stop)
        clients = [stack.enter_context(httpx.Client(base_url=s.url, timeout=90)) for s in servers]
        yield [functools.partial(Thread.create, client) for client in clients]


def _row(
    area: str, options: AreaOptions, runs: list[CaseRun], seconds: float, *extra: str
) -> AreaResult:
    violations = [Finding(r.case, inv, detail) for r in runs for inv, detail in r.violations]
    notes = [f"{r.case}: {r.observed} ({r.seconds:.1f} s)" for r in runs]
    return AreaResult(
        area=area,
        cases=len(runs),
        violations=violations,
        command=area_command("faults", options, *extra),
        seconds=seconds,
        notes=notes,
    )


def _guard(name: str, case: Callable[..., Any], *args: Any, **kwargs: Any) -> list[CaseRun]:
    """Run `case(*args, **kwargs)` (one `CaseRun` or a list of them).

    A harness failure becomes a finding of the case, not a crash of the area.
    """
    started = time.perf_counter()
    try:
        result = case(*args, **kwargs)
        return list(result) if isinstance(result, list) else [result]
    except Exception as exc:  # the campaign reports it and goes on
        return [
            CaseRun(
                name,
                "harness error",
                time.perf_counter() - started,
                [("harness", f"{type(exc).__name__}: {exc}"[:300])],
            )
        ]


def run(options: AreaOptions) -> list[AreaResult]:
    """The faults rows: model and summarizer, SQLite locked, disk full, PostgreSQL restart."""
    seeds = [options.seed + i for i in range(3 if options.full else 1)]
    brain = Brain()
    rows: list[AreaResult] = []
    workdir = options.workdir
    db = workdir / "main" / "gateway.db"
    with OpenAIStub(brain) as stub, ThreadPoolExecutor(2) as pool:
        started = time.perf_counter()
        launching = [  # both servers start at once: the start-up dominates the short form
            pool.submit(_launch, stub, workdir, "main", f"sqlite:///{db}"),
            pool.submit(
                _launch,
                stub,
                workdir,
                "diskfull",
                "memory://",
                fallback=False,
                file_size_limit=FILE_SIZE_LIMIT,
            ),
        ]
        servers = [f.result() for f in launching]
        with _clients(*servers) as (main_thread, full_thread):
            runs: list[CaseRun] = []
            for round_, seed in enumerate(seeds):
                rng = random.Random(seed)
                runs += _guard("model faults", model_faults, brain, main_thread, rng, round_)
                runs += _guard("model overflows its window", overflow_case, stub, main_thread, rng)
                if options.full:
                    runs += _guard(
                        "model overflows its window, estimate 3x the provider's",
                        overflow_case,
                        stub,
                        main_thread,
                        rng,
                        overcounted=True,
                    )
            for factory, fallback in ((main_thread, True), (full_thread, False)):
                runs += _guard(
                    "summarizer hangs, " + ("extractive fallback" if fallback else "no fallback"),
                    summarizer_hang_case,
                    factory,
                    fallback=fallback,
                    timeout=SUMMARY_TIMEOUT,
                )
            rows.append(
                _row(
                    "faults: model and summarizer (SQLite)",
                    options,
                    runs,
                    time.perf_counter() - started,
                )
            )
            started = time.perf_counter()
            runs = _guard(
                "SQLite locked by another process",
                sqlite_locked_case,
                main_thread,
                db,
                BUSY_TIMEOUT + 1.5,
            )
            rows.append(_row("faults: SQLite locked", options, runs, time.perf_counter() - started))
            started = time.perf_counter()
            runs = _guard("disk full", disk_full_cases, full_thread, workdir / "diskfull")
            rows.append(
                _row(
                    f"faults: disk full (RLIMIT_FSIZE {FILE_SIZE_LIMIT // 1024} KiB)",
                    options,
                    runs,
                    time.perf_counter() - started,
                )
            )
    rows.append(_postgres_row(options, seeds))
    return rows


def _postgres_row(options: AreaOptions, seeds: list[int]) -> AreaResult:
    name = "faults: PostgreSQL restarted mid-run"
    if not options.full or options.postgres_url is None:
        why = "short form" if not options.full else "no --postgres URL"
        return AreaResult(
            name,
            0,
            [],
            area_command("faults", options),
            0.0,
            [f"skipped ({why}): restarting the shared server is full-form only"],
        )
    started = time.perf_counter()
    brain = Brain()
    dsn = options.postgres_url.split("?", 1)[0]
    schema = f"foldwise_relfaults_{options.seed}_{int(time.time())}"
    storage = f"{dsn}?schema={schema}"
    runs: list[CaseRun] = []
    with (
        OpenAIStub(brain) as stub,
        _clients(_launch(stub, options.workdir, "postgres", storage, model_timeout=30.0)) as (mk,),
    ):
        for round_ in range(len(seeds)):
            runs += _guard(
                "PostgreSQL restarted mid-run", postgres_restart_case, brain, mk, dsn, round_=round_
            )
    return _row(name, options, runs, time.perf_counter() - started, "--postgres URL")
