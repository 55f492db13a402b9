"""`foldwise bench …`: benchmarks that print Markdown tables or JSON."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import typer
from rich.markdown import Markdown

from foldwise.cli._output import echo_json, fail, fail_on_errors, stdout_console

__all__ = ["bench_app"]

bench_app = typer.Typer(
    help="Run foldwise's benchmarks; without a command, every benchmark at full size.",
    rich_markup_mode="markdown",
)


_JsonOption = Annotated[bool, typer.Option("--json", help="Print the results as JSON.")]
_OutOption = Annotated[
    Path | None,
    typer.Option("--out", help="Also write the JSON results to this file.", dir_okay=False),
]


def _quick(help_text: str) -> Any:
    """The `--quick` option (a smaller run) with its command's description of it."""
    return typer.Option("--quick", help=help_text)


class _Report(Protocol):
    def to_dict(self) -> dict[str, Any]: ...

    def to_markdown(self) -> str: ...


def _print_report(report: _Report, *, as_json: bool, out: Path | None) -> None:
    data = report.to_dict()
    if out is not None:
        try:
            out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
        except OSError as err:
            fail(f"cannot write {out}: {err.strerror or err}")
    if as_json:
        echo_json(data)
        return
    console = stdout_console()
    if console.is_terminal:
        console.print(Markdown(report.to_markdown()))
    else:
        typer.echo(report.to_markdown().rstrip("\n"))
    if out is not None:
        typer.echo(f"wrote {out}", err=True)


@bench_app.command("tokens")
def tokens(
    quick: Annotated[bool, _quick("Smaller corpus and histories (seconds).")] = False,
    as_json: _JsonOption = False,
    out: _OutOption = None,
) -> None:
    """Token counting: accuracy per content class and per-call cost vs LangChain.

    Compares foldwise's counter and LangChain's `count_tokens_approximately` against an exact
    tokenizer on the shipped corpus, then times counting 100/1,000/10,000-message histories.
    """
    try:
        run = importlib.import_module("foldwise.bench").run_token_benchmark
    except (ImportError, AttributeError) as err:
        fail(f"the token benchmark is not available: {err}")
    with fail_on_errors():
        report = run(quick=quick)
    _print_report(report, as_json=as_json, out=out)


@bench_app.command("suite")
def suite(
    quick: Annotated[bool, _quick("Smaller scenarios (about a minute).")] = False,
    as_json: _JsonOption = False,
    out: _OutOption = None,
    results_dir: Annotated[
        Path | None,
        typer.Option(
            "--results-dir",
            help="Also write <date>-<machine>.json and .md there (e.g. bench/results).",
            file_okay=False,
        ),
    ] = None,
) -> None:
    """The whole suite: counting, overflows, thrash, cache-aware cost, integrity, retention.

    foldwise, LangChain's SummarizationMiddleware (default and matched trigger) and
    deepagents (when installed) replay the same scenarios with the same summarizer; the table
    has ratio columns against each peer.
    """
    from foldwise.bench import run_bench_suite

    with fail_on_errors():
        report = run_bench_suite(quick=quick, results_dir=results_dir)
    _print_report(report, as_json=as_json, out=out)


@bench_app.command("decision")
def decision(
    as_json: _JsonOption = False,
) -> None:
    """Per-call compaction decision cost on a 1,000-call run vs LangChain's middleware."""
    from foldwise.bench._decision import run_decision_benchmark

    with fail_on_errors():
        report = run_decision_benchmark()
    _print_report(report, as_json=as_json, out=None)


@bench_app.command("offload")
def offload(
    as_json: _JsonOption = False,
) -> None:
    """The big-corpus research session through foldwise with offload off and on.

    Prints real compactions, peak and total prompt tokens and provider refusals for each: the
    offload tier alone makes the difference.
    """
    from foldwise.bench import run_offload_ab

    with fail_on_errors():
        report = run_offload_ab()
    _print_report(report, as_json=as_json, out=None)


@bench_app.command("presummary")
def presummary(
    quick: Annotated[bool, _quick("Fast models, 30 turns (seconds).")] = False,
    as_json: _JsonOption = False,
    out: _OutOption = None,
) -> None:
    """The compacting turn's latency with background pre-summarization off and on.

    One thread, turn by turn, through `create_agent` with a 2 s summarizer: p95 of the turns
    that compacted over p95 of ordinary turns, when the window between `presummarize_at` and
    the trigger outlasts the summarizer and when it does not.
    """
    from foldwise.bench import run_presummary_benchmark

    with fail_on_errors():
        report = run_presummary_benchmark(quick=quick)
    _print_report(report, as_json=as_json, out=out)


@bench_app.command("memory")
def memory(
    quick: Annotated[bool, _quick("Fewer threads, a 2,000-fact latency corpus (seconds).")] = False,
    as_json: _JsonOption = False,
    out: _OutOption = None,
) -> None:
    """Long-term memory end to end; exits 1 when a target is missed.

    Recall and isolation, supersession, quarantine, scope, CJK search (against plain FTS5
    tables on the same queries) and the cost per run.
    """
    from foldwise.bench import run_memory_benchmark

    with fail_on_errors():
        report = run_memory_benchmark(quick=quick)
    _print_report(report, as_json=as_json, out=out)
    if not report.passed:
        raise typer.Exit(1)


@bench_app.command("reliability")
def reliability(
    short: Annotated[
        bool, typer.Option("--short", help="The short form `make test` runs (about a minute).")
    ] = False,
    area: Annotated[
        list[str] | None,
        typer.Option("--area", help="Run only this area (repeatable): crash, faults, load, ..."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every random choice.")] = 0,
    postgres: Annotated[
        str | None,
        typer.Option(
            "--postgres",
            help="PostgreSQL URL for the areas that use one (default: $FOLDWISE_TEST_POSTGRES; "
            "without one they are skipped and say so).",
        ),
    ] = None,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write", help="Write the table into this Markdown file (docs/reliability.md)."
        ),
    ] = None,
    as_json: _JsonOption = False,
    out: _OutOption = None,
) -> None:
    """Crash points, faults, load, fuzzing, injection and isolation; exits 1 on a violation."""
    import os

    from foldwise.bench import run_reliability, write_report

    with fail_on_errors():
        try:
            report = run_reliability(
                area or None,
                full=not short,
                seed=seed,
                postgres_url=postgres or os.environ.get("FOLDWISE_TEST_POSTGRES"),
            )
        except ValueError as error:
            fail(str(error))
        if write is not None:
            write_report(write, report)
    _print_report(report, as_json=as_json, out=out)
    if not report.passed:
        raise typer.Exit(1)


@bench_app.command("gateway")
def gateway(
    quick: Annotated[
        bool, _quick("Small counts: 5 pairs, 6 turns, 2 clients x 2 s (under a minute).")
    ] = False,
    postgres: Annotated[
        str | None,
        typer.Option("--postgres", help="Also measure foldwise on this PostgreSQL URL."),
    ] = None,
    no_langgraph: Annotated[
        bool, typer.Option("--no-langgraph", help="Measure foldwise alone.")
    ] = False,
    workdir: Annotated[
        Path | None,
        typer.Option("--workdir", help="Keep the servers' folders and logs here.", file_okay=False),
    ] = None,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write", help="Write the table into this Markdown file (docs/benchmarks.md)."
        ),
    ] = None,
    as_json: _JsonOption = False,
    out: _OutOption = None,
) -> None:
    """foldwise serve next to LangGraph's in-memory server (`langgraph dev`), one run.

    Sequential create + wait, one growing thread, N clients, streaming and RSS, against the
    same OpenAI-compatible stub with the `langgraph_sdk` client; ratios and the issue-16
    targets. Exits 1 when a measured foldwise column misses a target.
    """
    from foldwise.bench._gateway_bench import run_gateway_benchmark, write_gateway_report

    with fail_on_errors():
        report = run_gateway_benchmark(
            quick=quick, postgres_url=postgres, langgraph=not no_langgraph, workdir=workdir
        )
        if write is not None:
            write_gateway_report(write, report)
    _print_report(report, as_json=as_json, out=out)
    if not report.passed:
        raise typer.Exit(1)


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(f"--processes: comma-separated counts like 1,2,4, got {text!r}", code=2)
    if not counts or min(counts) < 1:
        fail(f"--processes: positive counts like 1,2,4, got {text!r}", code=2)
    return counts


def _backends(text: str) -> list[Literal["postgres", "sqlite"]]:
    chosen: list[Literal["postgres", "sqlite"]] = []
    for part in (p.strip() for p in text.split(",")):
        if part not in ("postgres", "sqlite"):
            fail(f"--storage: postgres and/or sqlite, got {part!r}", code=2)
        chosen.append("postgres" if part == "postgres" else "sqlite")
    return chosen


@bench_app.command("scale")
def scale(
    quick: Annotated[
        bool, _quick("4 clients x 3 s, processes 1 and 2 (a test of the harness).")
    ] = False,
    processes: Annotated[
        str, typer.Option("--processes", help="Worker process counts, comma-separated.")
    ] = "1,2,4",
    clients: Annotated[int, typer.Option("--clients", min=1, help="Concurrent clients.")] = 16,
    seconds: Annotated[
        float, typer.Option("--seconds", min=0.1, help="Seconds of load per workload.")
    ] = 30.0,
    storage: Annotated[
        str,
        typer.Option("--storage", help="Databases to measure, comma-separated: postgres, sqlite."),
    ] = "postgres",
    postgres: Annotated[
        str | None,
        typer.Option(
            "--postgres",
            help="PostgreSQL URL; a fresh schema per row (default: $FOLDWISE_TEST_POSTGRES).",
        ),
    ] = None,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write", help="Write the table into this Markdown file (docs/deployment.md)."
        ),
    ] = None,
    as_json: _JsonOption = False,
    out: _OutOption = None,
) -> None:
    """Throughput of `foldwise serve --workers P` on PostgreSQL for P = 1, 2, 4.

    Each process count gets a fresh database and a real server on the load stub; N clients run
    create + `runs/wait`, then a mixed load, for S seconds each: operations per second, p50 /
    p99, errors, the speed-up over one process, and the load average.
    """
    import os

    from foldwise.bench._gateway_scale import run_scale_benchmark, write_scale_section

    counts = [1, 2] if quick else _counts(processes)
    if quick:
        clients, seconds = 4, 3.0
    url = postgres or os.environ.get("FOLDWISE_TEST_POSTGRES")
    with fail_on_errors():
        try:
            report = run_scale_benchmark(
                processes=counts,
                backends=_backends(storage),
                clients=clients,
                seconds=seconds,
                postgres_url=url,
            )
        except ValueError as error:
            fail(str(error), code=2)
        if write is not None:
            write_scale_section(write, report)
    _print_report(report, as_json=as_json, out=out)


@bench_app.callback(invoke_without_command=True)
def _all(ctx: typer.Context) -> None:
    """Run foldwise's benchmarks; without a command, the whole suite (full size, Markdown)."""
    if ctx.invoked_subcommand is None:
        suite(quick=False, as_json=False, out=None, results_dir=None)
