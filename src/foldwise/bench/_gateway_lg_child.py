"""`langgraph dev` in this process, with the in-memory queue's idle poll optionally shortened.

Run as ``python -P _gateway_lg_child.py --poll SECONDS -- dev --no-browser ...`` (a script:
it imports no foldwise). It calls langgraph-cli's own click command, so everything else is
`langgraph dev` as shipped.

Why a patch: in langgraph-runtime-inmem (0.36.x), the background worker's loop calls
``ops.Runs.next(wait=True)`` after a look at the queue found nothing, and ``Runs.next`` then
sleeps a hard-coded ``asyncio.sleep(0.5)`` before it looks again; no environment variable or
``langgraph.json`` key changes it. So a run created on an idle server waits up to 0.5 s
before it starts. With ``--poll S`` the source of ``Runs.next`` is recompiled in this process
only, with ``asyncio.sleep(S)`` in place of ``asyncio.sleep(0.5)``; if that line is not there
exactly once (another version), the script exits 3 and says so instead of measuring something
else.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import textwrap

SHIPPED_SLEEP = "await asyncio.sleep(0.5)"
"""The idle poll in `langgraph_runtime_inmem.ops.Runs.next`."""


def shorten_poll(seconds: float) -> str:
    """Recompile `Runs.next` with a `seconds` idle poll; return a note saying what changed."""
    from langgraph_runtime_inmem import ops  # type: ignore[import-untyped]

    function = inspect.unwrap(ops.Runs.next)
    source = textwrap.dedent(inspect.getsource(function))
    if source.count(SHIPPED_SLEEP) != 1:
        sys.stderr.write(f"cannot shorten the poll: {SHIPPED_SLEEP!r} is not in Runs.next once\n")
        raise SystemExit(3)
    lines = source.replace(SHIPPED_SLEEP, f"await asyncio.sleep({seconds!r})").splitlines()
    body = "\n".join(line for line in lines if not line.startswith("@"))
    namespace: dict[str, object] = {}
    exec(compile(body, inspect.getsourcefile(function) or "<ops>", "exec"), ops.__dict__, namespace)
    ops.Runs.next = staticmethod(namespace["next"])  # type: ignore[arg-type]
    return f"langgraph_runtime_inmem.ops.Runs.next: asyncio.sleep(0.5) -> asyncio.sleep({seconds})"


def main(argv: list[str]) -> None:
    """Parse ``--poll``, patch if asked, then run langgraph-cli with the rest."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poll", type=float, default=None, help="idle poll seconds (patched)")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- then langgraph arguments")
    options = parser.parse_args(argv)
    rest = options.rest[1:] if options.rest[:1] == ["--"] else options.rest
    if options.poll is not None:
        sys.stderr.write(shorten_poll(options.poll) + "\n")
    from langgraph_cli.cli import cli

    cli.main(args=rest, prog_name="langgraph")


if __name__ == "__main__":
    main(sys.argv[1:])
