"""`foldwise memory …`: read and maintain long-term memory from the shell.

Every command works on one namespace, ``--user`` and ``--agent`` (``--shared``: the user's
facts shared by all agents), over the configured backend (``memory.url``, else
``storage.url``). ``forget`` deletes for real; everything else keeps history.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from foldwise.cli._output import EXIT_USAGE, echo_json, fail, fail_on_errors
from foldwise.config import load_config

__all__ = ["memory_app"]

memory_app = typer.Typer(help="Read and maintain long-term memory.", no_args_is_help=True)

_Config = Annotated[
    Path | None, typer.Option("--config", "-c", help="foldwise.yaml (default: discovered).")
]
_User = Annotated[str, typer.Option("--user", "-u", help="The user id.")]
_Agent = Annotated[
    str | None, typer.Option("--agent", "-a", help="The agent (default: memory.agent).")
]
_Shared = Annotated[bool, typer.Option("--shared", help="The user's facts shared by all agents.")]
_Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]
_FactId = Annotated[str, typer.Argument(help="A fact id (from `list` or `search`).")]


@contextmanager
def _memory(config: Path | None, user: str, agent: str | None, shared: bool) -> Iterator[Any]:
    from foldwise.memory import MemoryManager, namespace_for

    with fail_on_errors():
        loaded = load_config(config)
        namespace = namespace_for(user, None if shared else (agent or loaded.memory.agent))
        manager = MemoryManager.from_config(loaded)
        manager.setup()
        try:
            yield manager, namespace
        finally:
            manager.close()


def _print(facts: list[Any], as_json: bool) -> None:
    if as_json:
        echo_json([f.model_dump(mode="json") for f in facts])
        return
    if not facts:
        typer.echo("no facts")
    for fact in facts:
        until = f" until {fact.valid_to:%Y-%m-%d %H:%M}" if fact.valid_to else ""
        reason = f" ({fact.reason})" if fact.reason else ""
        typer.echo(
            f"{fact.id}  {fact.status:<11} r{fact.revision}  {fact.subject}.{fact.attribute}  "
            f"{fact.text}  [since {fact.valid_from:%Y-%m-%d %H:%M}{until}]{reason}"
        )


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option("--k", "-k", help="How many facts.")] = 5,
    as_of: Annotated[
        datetime | None, typer.Option("--as-of", help="What was current then (ISO time, UTC).")
    ] = None,
    user: _User = "default",
    agent: _Agent = None,
    shared: _Shared = False,
    config: _Config = None,
    as_json: _Json = False,
) -> None:
    """Search the user's facts (active ones, or those current at `--as-of`)."""
    from datetime import UTC

    when = as_of.replace(tzinfo=as_of.tzinfo or UTC) if as_of else None
    with _memory(config, user, agent, shared) as (manager, ns), fail_on_errors():
        _print(manager.search(ns, query, k=k, as_of=when), as_json)


@memory_app.command("list")
def list_facts(
    status: Annotated[
        str | None,
        typer.Option("--status", help="active, superseded, retracted or quarantined."),
    ] = None,
    user: _User = "default",
    agent: _Agent = None,
    shared: _Shared = False,
    config: _Config = None,
    as_json: _Json = False,
) -> None:
    """List the user's facts."""
    with _memory(config, user, agent, shared) as (manager, ns), fail_on_errors():
        _print(manager.list(ns, status=status), as_json)


@memory_app.command("add")
def add(
    text: Annotated[str, typer.Argument(help="The fact, in one sentence.")],
    attribute: Annotated[
        str | None, typer.Option("--attribute", help="Its slot (default: read from the text).")
    ] = None,
    user: _User = "default",
    agent: _Agent = None,
    shared: _Shared = False,
    config: _Config = None,
    as_json: _Json = False,
) -> None:
    """Add a fact; a new value for its slot supersedes the old one."""
    from foldwise.memory import FactSource

    with _memory(config, user, agent, shared) as (manager, ns), fail_on_errors():
        _print([manager.add(ns, text, attribute=attribute, source=FactSource(via="cli"))], as_json)


@memory_app.command("history")
def history(
    fact_id: _FactId,
    user: _User = "default",
    agent: _Agent = None,
    shared: _Shared = False,
    config: _Config = None,
    as_json: _Json = False,
) -> None:
    """Every version of the fact's slot, oldest first."""
    with _memory(config, user, agent, shared) as (manager, ns), fail_on_errors():
        _print(manager.history(ns, fact_id), as_json)


@memory_app.command("forget")
def forget(
    fact_id: _FactId,
    user: _User = "default",
    agent: _Agent = None,
    shared: _Shared = False,
    config: _Config = None,
) -> None:
    """Delete the fact and every version of its slot, for real."""
    with _memory(config, user, agent, shared) as (manager, ns), fail_on_errors():
        typer.echo(f"forgot {manager.forget(ns, fact_id)} version(s) of {fact_id}")


@memory_app.command("approve")
def approve(
    fact_id: _FactId,
    user: _User = "default",
    agent: _Agent = None,
    shared: _Shared = False,
    config: _Config = None,
) -> None:
    """Release a quarantined fact into active memory."""
    with _memory(config, user, agent, shared) as (manager, ns), fail_on_errors():
        _print([manager.approve(ns, fact_id)], False)


@memory_app.command("reject")
def reject(
    fact_id: _FactId,
    user: _User = "default",
    agent: _Agent = None,
    shared: _Shared = False,
    config: _Config = None,
) -> None:
    """Refuse a quarantined fact (kept, retracted, for the record)."""
    with _memory(config, user, agent, shared) as (manager, ns), fail_on_errors():
        _print([manager.reject(ns, fact_id)], False)


@memory_app.command("export")
def export(
    user: _User = "default",
    agent: _Agent = None,
    shared: _Shared = False,
    config: _Config = None,
) -> None:
    """Print every fact of the namespace (all statuses) as JSON Lines."""
    with _memory(config, user, agent, shared) as (manager, ns), fail_on_errors():
        for fact in manager.list(ns):
            typer.echo(json.dumps(fact.model_dump(mode="json"), ensure_ascii=False))


@memory_app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(help="JSON Lines from `export` (`-`: stdin).")],
    user: _User = "default",
    agent: _Agent = None,
    shared: _Shared = False,
    config: _Config = None,
) -> None:
    """Add exported facts to the namespace (ids, statuses and validity kept; known ids skipped)."""
    from foldwise.memory import Fact

    if str(path) != "-" and not path.is_file():
        fail(f"{path}: no such file", code=EXIT_USAGE)
    text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    lines = text.splitlines()
    facts: list[Fact] = []
    with _memory(config, user, agent, shared) as (manager, ns):
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                facts.append(Fact.model_validate({**json.loads(line), "namespace": ns}))
            except (ValueError, TypeError) as exc:
                fail(f"{path}: line {number}: {' '.join(str(exc).split())[:300]}", code=EXIT_USAGE)
        with fail_on_errors():
            known = {f.id for f in manager.list(ns)}
            fresh = [f for f in facts if f.id not in known]
            manager.backend.write(ns, new=fresh)
    typer.echo(f"imported {len(fresh)} fact(s), skipped {len(facts) - len(fresh)} known id(s)")
