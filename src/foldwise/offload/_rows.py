r"""Rows: lines of a stored text, with long lines wrapped, read from a stream of pieces.

Lines are split on `\n` only (a `\r` stays in its row), and a line longer than
`MAX_ROW_CHARS` becomes several rows, the later ones marked as continuations. Joining rows with
`\n` before each non-continuation row (except the first) gives the text back exactly. Rows are
produced from the stored text piece by piece, so paging and searching never need the whole text
in memory at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from foldwise.offload._models import ArtifactRow

__all__ = ["MAX_ROW_CHARS", "RowSplitter", "count_rows", "iter_rows", "join_rows"]

MAX_ROW_CHARS = 2000
"""Lines longer than this are wrapped into several rows, so a single huge line stays pageable."""


def _cut(text: str, limit: int) -> int:
    """Where to cut `text` at most `limit` characters in, never between a surrogate pair."""
    if limit < len(text) and limit > 1 and "\ud800" <= text[limit - 1] <= "\udbff":
        return limit - 1
    return limit


class RowSplitter:
    """Cuts a text fed piece by piece into rows, as soon as each row is complete.

    Args:
        max_row_chars: Wrap width.
    """

    def __init__(self, *, max_row_chars: int = MAX_ROW_CHARS) -> None:
        self.max_row_chars = max_row_chars
        self._index = 0
        self._buffer = ""
        self._continuing = False

    def _emit(self, text: str) -> ArtifactRow:
        row = ArtifactRow(self._index, text, self._continuing)
        self._index += 1
        return row

    def feed(self, piece: str) -> list[ArtifactRow]:
        """The rows completed by the next piece of the text."""
        rows: list[ArtifactRow] = []
        start = 0
        while True:
            newline = piece.find("\n", start)
            self._buffer += piece[start:] if newline < 0 else piece[start:newline]
            while len(self._buffer) > self.max_row_chars:
                cut = _cut(self._buffer, self.max_row_chars)
                rows.append(self._emit(self._buffer[:cut]))
                self._continuing = True
                self._buffer = self._buffer[cut:]
            if newline < 0:
                return rows
            rows.append(self._emit(self._buffer))
            self._buffer = ""
            self._continuing = False
            start = newline + 1

    def finish(self) -> ArtifactRow:
        """The last row (possibly empty: the empty text has one empty row)."""
        return self._emit(self._buffer)


def iter_rows(
    pieces: Iterable[str], *, max_row_chars: int = MAX_ROW_CHARS
) -> Iterator[ArtifactRow]:
    """Yield the rows of the text made of `pieces`, in order.

    Args:
        pieces: The text in consecutive pieces of any size.
        max_row_chars: Wrap width.

    Yields:
        Rows numbered from 0; the empty text has one empty row.
    """
    splitter = RowSplitter(max_row_chars=max_row_chars)
    for piece in pieces:
        yield from splitter.feed(piece)
    yield splitter.finish()


def count_rows(text: str, *, max_row_chars: int = MAX_ROW_CHARS) -> int:
    """Number of rows `iter_rows` yields for `text`."""
    return sum(1 for _ in iter_rows((text,), max_row_chars=max_row_chars))


def join_rows(rows: Iterable[ArtifactRow]) -> str:
    """Rebuild the text from consecutive rows (the inverse of `iter_rows`)."""
    parts: list[str] = []
    first = True
    for row in rows:
        if not first and not row.continuation:
            parts.append("\n")
        parts.append(row.text)
        first = False
    return "".join(parts)
