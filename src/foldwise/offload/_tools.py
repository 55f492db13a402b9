"""`read_offloaded` and `search_offloaded`: the model's way back to offloaded text.

The tools are bound to a store; the thread comes from the run (`foldwise._thread_id`, the
resolver every offload and archive uses), never from the model, so a model can only reach
artifacts of its own thread. Every failure comes back as a short `Error: ...` string, never as
an exception that would end the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field

from foldwise._steps import Io, Steps, perform, run_async, run_sync
from foldwise._thread_id import NO_THREAD, resolve_thread_id
from foldwise.errors import ArtifactIdError, ArtifactNotFoundError, StorageError
from foldwise.offload._models import ArtifactPage, ArtifactSearchResult, SearchMatch
from foldwise.offload._rows import MAX_ROW_CHARS
from foldwise.offload._search import DEFAULT_SEARCH_SECONDS
from foldwise.offload._store import DEFAULT_PAGE_CHARS, ArtifactStore

__all__ = [
    "MAX_PAGE_ROWS",
    "NO_THREAD_ID",
    "READ_TOOL_NAME",
    "SEARCH_TOOL_NAME",
    "format_page",
    "format_search",
    "offload_tools",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

READ_TOOL_NAME = "read_offloaded"
SEARCH_TOOL_NAME = "search_offloaded"
NO_THREAD_ID = NO_THREAD
"""Thread used when a run has no thread id (no checkpointer); see `foldwise._thread_id`."""
MAX_PAGE_ROWS = 1000
"""Upper bound of `limit`."""
_SNIPPET_CONTEXT = 150
_MAX_SHOWN_MATCH = 300

_READ_DESCRIPTION = (
    "Read a stored tool output or user message that was too large to show in full, by the "
    "artifact id from its offload notice (art_ followed by 24 hex digits). Returns up to `limit` "
    "numbered rows starting at row `offset` (0-based: offset=0 starts at row 1) and, when more "
    "follows, the exact call for the next page. Lines longer than "
    f"{MAX_ROW_CHARS:,} characters are split into several rows; a '+' after a row number means "
    "the row continues the line of the row before it."
)
_SEARCH_DESCRIPTION = (
    "Search a stored artifact (id art_ + 24 hex digits, from an offload notice) and get the "
    "matching rows with their row numbers. `pattern` is a case-sensitive substring, or with "
    "regex=true a Python regular expression (start it with (?i) to ignore case); the search has "
    "a time limit. To read around row N, call read_offloaded(artifact_id, offset=N-1)."
)


def _describe_row_span(page: ArtifactPage) -> str:
    ref = page.ref
    if not page.rows:
        return f"artifact {ref.artifact_id}: no rows at offset {page.offset} (it has {ref.rows:,})"
    first, last = page.rows[0].index + 1, page.rows[-1].index + 1
    return (
        f"artifact {ref.artifact_id} ({ref.source}, {ref.chars:,} characters): rows "
        f"{first:,}-{last:,} of {ref.rows:,}"
    )


def format_page(page: ArtifactPage) -> str:
    """Render a page for the model: a header, numbered rows, and the next call or the end."""
    lines = [_describe_row_span(page)]
    width = len(str(page.ref.rows))
    for row in page.rows:
        mark = "+" if row.continuation else " "
        lines.append(f"{row.index + 1:>{width}}{mark}\t{row.text}")
    if page.next_offset is not None:
        lines.append(
            f'[more: call read_offloaded("{page.ref.artifact_id}", offset={page.next_offset})]'
        )
    elif page.rows:
        lines.append("[end of artifact]")
    return "\n".join(lines)


def _snippet(match: SearchMatch) -> str:
    text = match.text
    start = max(0, match.start - _SNIPPET_CONTEXT)
    end = min(len(text), max(match.end, match.start + 1) + _SNIPPET_CONTEXT)
    end = min(end, match.start + _MAX_SHOWN_MATCH + _SNIPPET_CONTEXT)
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(text) else ""
    return prefix + text[start:end] + suffix


def format_search(result: ArtifactSearchResult) -> str:
    """Render search results for the model: one line per matching row."""
    ref = result.ref
    mode = "regex" if result.regex else "substring"
    count = len(result.matches)
    header = (
        f"artifact {ref.artifact_id} ({ref.rows:,} rows): {count} matching row"
        f"{'' if count == 1 else 's'} for {mode} {result.pattern!r}"
    )
    if result.complete:
        header += " (searched everything)"
    elif result.stopped_reason:
        header += f" (stopped early: {result.stopped_reason})"
    lines = [header]
    width = len(str(ref.rows))
    lines += [f"{m.row + 1:>{width}}: {_snippet(m)}" for m in result.matches]
    if result.matches:
        lines.append(
            f'[to read around row N: read_offloaded("{ref.artifact_id}", offset=N-1, limit=40)]'
        )
    return "\n".join(lines)


def _error(exc: Exception, thread_id: str, artifact_id: object) -> str:
    if isinstance(exc, ArtifactIdError | ArtifactNotFoundError | ValueError):
        return f"Error: {exc}"
    logger.error("offload read failed (thread %s, artifact %r): %s", thread_id, artifact_id, exc)
    return "Error: the artifact store failed; try again later"


_Handled = (ArtifactIdError, ArtifactNotFoundError, StorageError, ValueError, OSError)

_Id = Annotated[str, Field(description="The artifact id from the offload notice (art_...).")]
_Offset = Annotated[int, Field(description="0-based index of the first row to return.")]
_Limit = Annotated[int, Field(description=f"Rows to return (at most {MAX_PAGE_ROWS}).")]
_Pattern = Annotated[str, Field(description="Substring, or regular expression if regex=true.")]
_MaxMatches = Annotated[int, Field(description="Stop after this many matching rows.")]
_Regex = Annotated[bool, Field(description="Treat the pattern as a Python regular expression.")]


def _answer_steps(
    runtime: ToolRuntime[Any, Any] | None,
    artifact_id: str,
    ask: Callable[[str], Io[T]],
    render: Callable[[T], str],
) -> Steps[str]:
    """Resolve the run's thread, perform the store request `ask(thread)`, render the answer."""
    thread_id = resolve_thread_id(runtime)
    try:
        found = yield from perform(ask(thread_id))
    except _Handled as exc:
        return _error(exc, thread_id, artifact_id)
    return render(found)


def _read_steps(
    store: ArtifactStore,
    max_page_chars: int,
    artifact_id: str,
    runtime: ToolRuntime[Any, Any] | None,
    offset: int = 0,
    limit: int = 200,
) -> Steps[str]:
    def ask(thread_id: str) -> Io[ArtifactPage]:
        limit_rows = max(1, min(MAX_PAGE_ROWS, limit))
        return Io.of(
            store.read_page,
            store.aread_page,
            thread_id,
            artifact_id,
            offset=max(0, offset),
            limit=limit_rows,
            max_chars=max_page_chars,
        )

    return _answer_steps(runtime, artifact_id, ask, format_page)


def _search_steps(
    store: ArtifactStore,
    timeout_seconds: float,
    artifact_id: str,
    pattern: str,
    runtime: ToolRuntime[Any, Any] | None,
    max_matches: int = 20,
    regex: bool = False,
) -> Steps[str]:
    def ask(thread_id: str) -> Io[ArtifactSearchResult]:
        return Io.of(
            store.search,
            store.asearch,
            thread_id,
            artifact_id,
            pattern,
            regex=regex,
            max_matches=max_matches,
            timeout_seconds=timeout_seconds,
        )

    return _answer_steps(runtime, artifact_id, ask, format_search)


def offload_tools(
    store: ArtifactStore,
    *,
    max_page_chars: int = DEFAULT_PAGE_CHARS,
    search_timeout_seconds: float = DEFAULT_SEARCH_SECONDS,
) -> list[BaseTool]:
    """The `read_offloaded` and `search_offloaded` tools, bound to `store`.

    Args:
        store: Where the artifacts are.
        max_page_chars: Character bound of one page of `read_offloaded`.
        search_timeout_seconds: Time budget of one `search_offloaded` call.

    Returns:
        `[read_offloaded, search_offloaded]`, sync and async (the async forms use only the
        store's async methods).
    """
    # The sync functions carry the signatures LangChain builds the tool schemas from; it calls
    # the coroutines with the same validated keyword arguments.

    def read_offloaded(
        artifact_id: _Id, runtime: ToolRuntime, offset: _Offset = 0, limit: _Limit = 200
    ) -> str:
        return run_sync(_read_steps(store, max_page_chars, artifact_id, runtime, offset, limit))

    async def aread_offloaded(**args: Any) -> str:
        return await run_async(_read_steps(store, max_page_chars, **args))

    def search_offloaded(
        artifact_id: _Id,
        pattern: _Pattern,
        runtime: ToolRuntime,
        max_matches: _MaxMatches = 20,
        regex: _Regex = False,
    ) -> str:
        steps = _search_steps(
            store, search_timeout_seconds, artifact_id, pattern, runtime, max_matches, regex
        )
        return run_sync(steps)

    async def asearch_offloaded(**args: Any) -> str:
        return await run_async(_search_steps(store, search_timeout_seconds, **args))

    read: Callable[..., str] = read_offloaded
    search: Callable[..., str] = search_offloaded
    return [
        StructuredTool.from_function(
            func=read,
            coroutine=aread_offloaded,
            name=READ_TOOL_NAME,
            description=_READ_DESCRIPTION,
        ),
        StructuredTool.from_function(
            func=search,
            coroutine=asearch_offloaded,
            name=SEARCH_TOOL_NAME,
            description=_SEARCH_DESCRIPTION,
        ),
    ]
