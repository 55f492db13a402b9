"""Value objects of the artifact store: references, pages, search results, GC reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ArtifactKind",
    "ArtifactPage",
    "ArtifactRef",
    "ArtifactRow",
    "ArtifactSearchResult",
    "GcReport",
    "SearchMatch",
]

ArtifactKind = Literal["tool", "human", "archive"]


class ArtifactRef(BaseModel):
    r"""Where an offloaded text lives and what it is; a plain dict in LangGraph state.

    Attributes:
        artifact_id: `art_` + 24 hex digits, generated from the thread and the content.
        thread_id: The owning thread, as the caller named it.
        source: The tool name, `"human"` for pasted user input, `"compaction"` for an archive.
        kind: `"tool"`, `"human"`, or `"archive"` (messages removed by a compaction).
        chars: Length of the text in characters (code points).
        tokens: Estimated tokens (`foldwise.tokens.estimate_tokens`).
        size_bytes: UTF-8 size of the text; what quotas count.
        lines: Number of lines (`text.count("\n") + 1`).
        rows: Number of pageable rows (lines wrapped at `MAX_ROW_CHARS`).
        sha256: Hex SHA-256 of the UTF-8 text, to check a reconstruction.
        created_at: ISO-8601 UTC time of the (last) store write.
        preview: One line describing the start of the text, at most 120 characters.
        meta: Small string metadata (`tool_call_id`, `message_id`, ...).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    artifact_id: str
    thread_id: str
    source: str
    kind: ArtifactKind
    chars: int
    tokens: int
    size_bytes: int
    lines: int
    rows: int
    sha256: str
    created_at: str
    preview: str = ""
    meta: dict[str, str] = {}

    @property
    def created(self) -> datetime:
        """`created_at` as an aware datetime."""
        return datetime.fromisoformat(self.created_at)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what goes into `additional_kwargs` and the `offloads` channel)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArtifactRef:
        """Rebuild a reference from `to_dict` output (unknown keys are ignored)."""
        return cls.model_validate(data)


@dataclass(frozen=True)
class ArtifactRow:
    """One pageable row: a line, or a slice of a line longer than `MAX_ROW_CHARS`.

    Attributes:
        index: 0-based row index (what `read_offloaded(offset=...)` counts).
        text: The row text, without its line break.
        continuation: True when the row continues the previous row's line.
    """

    index: int
    text: str
    continuation: bool = False


@dataclass(frozen=True)
class ArtifactPage:
    """A bounded page of rows.

    Attributes:
        ref: The artifact.
        offset: Index of the first row asked for.
        rows: The rows returned (possibly fewer than asked, to respect the character bound).
        next_offset: Offset of the next page, or `None` at the end.
    """

    ref: ArtifactRef
    offset: int
    rows: tuple[ArtifactRow, ...]
    next_offset: int | None


@dataclass(frozen=True)
class SearchMatch:
    """A row containing a match.

    Attributes:
        row: 0-based row index.
        start: Character offset of the match in the row.
        end: Character offset just past the match (may reach into the next row).
        text: The row text.
    """

    row: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class ArtifactSearchResult:
    """What a search found.

    Attributes:
        ref: The artifact searched.
        pattern: The pattern as given.
        regex: Whether it was a regular expression.
        matches: Matching rows in order (one entry per row).
        complete: True when every row was searched.
        stopped_reason: Why the search stopped early (`"max_matches"`, `"time budget"`, ...).
    """

    ref: ArtifactRef
    pattern: str
    regex: bool
    matches: tuple[SearchMatch, ...]
    complete: bool
    stopped_reason: str | None = None


@dataclass(frozen=True)
class GcReport:
    """What a garbage collection removed.

    Attributes:
        removed: References of the artifacts removed, oldest first.
        freed_bytes: Total `size_bytes` of the removed artifacts.
        threads_scanned: How many thread folders / namespaces were looked at.
        threads_removed: Thread keys whose last artifact went (their folder is gone too).
        orphans_removed: Leftover temporary or half-written files cleaned up.
        errors: One line per thread whose collection failed (logged, not raised).
    """

    removed: tuple[ArtifactRef, ...] = ()
    freed_bytes: int = 0
    threads_scanned: int = 0
    threads_removed: tuple[str, ...] = ()
    orphans_removed: int = 0
    errors: tuple[str, ...] = field(default=())

    @property
    def removed_ids(self) -> list[str]:
        """Ids of the removed artifacts."""
        return [ref.artifact_id for ref in self.removed]

    def offload_removals(self) -> list[dict[str, Any]]:
        """Entries that, merged into an `offloads` channel, drop the removed artifacts."""
        return [{"artifact_id": ref.artifact_id, "removed": True} for ref in self.removed]
