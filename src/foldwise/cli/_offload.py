"""`foldwise offload …`: artifact store maintenance."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from foldwise.cli._output import echo_json, fail_on_errors
from foldwise.config import load_config

__all__ = ["offload_app"]

offload_app = typer.Typer(help="Maintain the offload artifact store.", no_args_is_help=True)


@offload_app.command("gc")
def gc(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="foldwise.yaml (default: discovered).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Remove artifacts older than `offload.max_age_days` and beyond the per-thread quota."""
    from foldwise.offload import collect_garbage

    with fail_on_errors():
        report = collect_garbage(load_config(config))
    removed = [ref.to_dict() for ref in report.removed]
    if as_json:
        echo_json(
            {
                "removed": removed,
                "freed_bytes": report.freed_bytes,
                "threads_scanned": report.threads_scanned,
                "orphans_removed": report.orphans_removed,
                "errors": list(report.errors),
            }
        )
        return
    typer.echo(
        f"removed {len(removed)} artifact(s), freed {report.freed_bytes:,} bytes "
        f"({report.threads_scanned} thread(s) scanned, {report.orphans_removed} leftovers)"
    )
    for ref in removed:
        typer.echo(f"  {ref['thread_id']} {ref['artifact_id']} ({ref['chars']:,} chars)")
    for line in report.errors:
        typer.echo(f"warning: {line}", err=True)
