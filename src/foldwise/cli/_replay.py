"""`foldwise replay` and `foldwise demo`: recorded sessions through foldwise and its peers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from foldwise.cli._output import echo_json, fail_on_errors
from foldwise.config import FoldwiseConfig, load_config

__all__ = ["demo", "replay"]


def _config(path: Path | None) -> FoldwiseConfig | None:
    return load_config(path) if path is not None else None


_TraceArgument = Annotated[Path, typer.Argument(help="The recorded session (JSON or JSONL).")]
_ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="foldwise.yaml to replay with.")
]
_FormatOption = Annotated[
    str, typer.Option("--format", help="auto, openai, langchain or anthropic (default: detect).")
]
_PeersOption = Annotated[
    str,
    typer.Option(
        "--peers",
        help="Comma-separated peers: langchain, langchain-matched, deepagents, raw; '' none.",
    ),
]
_WindowOption = Annotated[
    int | None, typer.Option("--window", help="The provider's context window in tokens.")
]
_ExactOption = Annotated[
    bool, typer.Option("--exact", help="Also count every request with o200k_base.")
]
_ReportOption = Annotated[
    Path | None,
    typer.Option("--report", help="Write a self-contained HTML report here.", dir_okay=False),
]
_JsonOption = Annotated[bool, typer.Option("--json", help="Print the results as JSON.")]


def replay(
    trace: _TraceArgument,
    config: _ConfigOption = None,
    trace_format: _FormatOption = "auto",
    peers: _PeersOption = "langchain,langchain-matched",
    window: _WindowOption = None,
    exact: _ExactOption = False,
    report: _ReportOption = None,
    as_json: _JsonOption = False,
) -> None:
    """Replay a recorded session through foldwise (and its peers) and report what happened.

    Every point where the recorded assistant was called runs the real middleware stack:
    request tokens by part, compactions and their receipts, offloaded artifacts, and whether
    every user message is still verbatim or recoverable.
    """
    from foldwise.replay import compare_trace, format_summary, write_html_report

    names = [p.strip() for p in peers.split(",") if p.strip()]
    with fail_on_errors():
        comparison = compare_trace(
            trace,
            config=_config(config),
            peers=names,
            exact=exact,
            format=trace_format,  # type: ignore[arg-type]
            window=window,
        )
        if report is not None:
            write_html_report(comparison.reports, report, title=f"foldwise replay: {trace.name}")
    if as_json:
        echo_json(comparison.to_dict())
        return
    typer.echo(format_summary(comparison.reports))
    if report is not None:
        typer.echo(f"wrote {report}", err=True)


def demo(
    out: Annotated[
        Path, typer.Option("--out", help="Where to write the HTML report.", dir_okay=False)
    ] = Path("demo-report.html"),
    quick: Annotated[
        bool, typer.Option("--quick", help="Smaller sessions (seconds; not the demo's numbers).")
    ] = False,
    as_json: _JsonOption = False,
) -> None:
    """The offline showcase: shipped sessions through foldwise and LangChain, side by side.

    A pasted-proposal review, a research timeline over a big corpus and a Chinese coding
    session are replayed with no network and no API key; the comparison is printed and an
    HTML report written.
    """
    from foldwise.replay import run_demo

    with fail_on_errors():
        result = run_demo(out, quick=quick)
    if as_json:
        echo_json(result.to_dict())
        return
    typer.echo(str(result))
    typer.echo(f"wrote {out}", err=True)
