"""What differs between SQLite and PostgreSQL under `SqlMemoryBackend`, and nothing else.

Queries are written once with ``?`` placeholders and ``{p}`` for the table prefix (nothing for
SQLite, the quoted schema and a dot for PostgreSQL). A dialect owns the connection (sync
DB-API: stdlib `sqlite3`, `psycopg` 3), hands out sessions for reads and one-transaction
writes, converts times, runs the memory migrations (their own ledger,
``memory_schema_migrations``, next to the gateway's ``schema_migrations`` in the same file or
schema), and does the two things that really differ: indexing a fact's terms and the ranked
search. Both index the same pre-tokenized `foldwise.memory._terms` terms:

- SQLite: an FTS5 table (``memory_fts``) whose ``ascii`` tokenizer only splits on the spaces
  between our terms (non-ASCII characters are token characters, so ``北京`` stays one token),
  ranked by ``bm25()``; a hashed namespace column restricts the match to one namespace (its
  weight is 0). FTS5 keeps its statistics per table, so the IDF counts every namespace's rows
  (a score, never a result, depends on other namespaces), and a term in more than half of all
  rows gets FTS5's floor IDF: such a term barely ranks and confidence, then recency, decide.
- PostgreSQL: a ``tsvector`` built from the terms and their positions (no text-search parser
  involved, so no locale can re-split CJK), a GIN index for the OR match, and BM25 computed in
  SQL from the per-namespace document frequencies and lengths.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, ClassVar, Protocol

from foldwise.errors import StorageError
from foldwise.memory._backend_common import SearchArgs
from foldwise.memory._bm25 import K1, B

__all__ = [
    "MIGRATIONS",
    "Dialect",
    "PostgresSearch",
    "Row",
    "Session",
    "SqliteSearch",
    "database_errors",
    "fts_match",
    "namespace_token",
]

Row = Sequence[Any]


class Session(Protocol):
    """One connection (inside a transaction for writes) taking ``?``-placeholder queries."""

    def fetchone(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        """Run `query` and return its first row, or `None`."""
        ...

    def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run `query` and return every row."""
        ...

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        """Run `query`."""
        ...


_FACTS = """CREATE TABLE {p}memory_facts (
    seq {serial},
    namespace TEXT NOT NULL,
    fact_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    attribute TEXT NOT NULL,
    status TEXT NOT NULL,
    confidence {real} NOT NULL,
    valid_from {time} NOT NULL,
    valid_to {time},
    recorded_at {time} NOT NULL,
    revision INTEGER NOT NULL,
    body TEXT NOT NULL,
    embedding {blob}{extra},
    UNIQUE (namespace, fact_id)
)"""
_INDEXES = (
    "CREATE INDEX memory_facts_slot_idx ON {p}memory_facts (namespace, subject, attribute)",
    "CREATE INDEX memory_facts_status_idx ON {p}memory_facts (namespace, status, recorded_at)",
)

MIGRATIONS: dict[str, tuple[tuple[int, str, tuple[str, ...]], ...]] = {
    "sqlite": (
        (
            1,
            "memory facts and their FTS5 index",
            (
                _FACTS.format(
                    p="",
                    serial="INTEGER PRIMARY KEY AUTOINCREMENT",
                    real="REAL",
                    time="TEXT",
                    blob="BLOB",
                    extra="",
                ),
                *(s.format(p="") for s in _INDEXES),
                "CREATE VIRTUAL TABLE memory_fts USING fts5(ns, terms, tokenize = 'ascii')",
            ),
        ),
    ),
    "postgres": (
        (
            1,
            "memory facts with a tsvector and its GIN index",
            (
                _FACTS.format(
                    p="{p}",
                    serial="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
                    real="DOUBLE PRECISION",
                    time="TIMESTAMPTZ",
                    blob="BYTEA",
                    extra=",\n    terms TSVECTOR NOT NULL,\n    doc_len INTEGER NOT NULL",
                ),
                *_INDEXES,
                "CREATE INDEX memory_facts_terms_idx ON {p}memory_facts USING GIN (terms)",
            ),
        ),
    ),
}
"""Per database: ``(version, name, statements)``; append, never edit a released one."""


def namespace_token(key: str) -> str:
    """The one FTS5 token standing for a namespace key (hex digest: the tokenizer keeps it)."""
    return "n" + hashlib.sha256(key.encode()).hexdigest()[:32]


def fts_match(key: str, terms: Sequence[str]) -> str:
    """The FTS5 query: this namespace's token AND any of `terms` (quoted, so taken literally)."""
    quoted = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    return f"ns:{namespace_token(key)} AND terms:({quoted})"


def _status_filter(args: SearchArgs) -> str:
    marks = ", ".join("?" for _ in args.statuses)
    text = f" AND f.status IN ({marks})"
    if args.as_of is not None:
        text += " AND f.valid_from <= ? AND (f.valid_to IS NULL OR f.valid_to > ?)"
    return text


_ORDER = " ORDER BY score DESC, f.confidence DESC, f.recorded_at DESC, f.fact_id LIMIT ?"


class Dialect:
    """Base of the per-database parts; subclasses fill in the connection and the hooks."""

    name: ClassVar[str] = ""
    prefix: str = ""
    lock: ClassVar[str] = ""
    """Appended to a ``SELECT`` that reads a row the write transaction will change."""

    def sql(self, template: str) -> str:
        """`template` with its ``{p}`` table prefix filled in."""
        return template.replace("{p}", self.prefix)

    def open(self) -> None:  # pragma: no cover - overridden
        """Connect and migrate (once; a second call is a no-op)."""
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - overridden
        """Disconnect; safe to call twice."""
        raise NotImplementedError

    def read(self) -> AbstractContextManager[Session]:  # pragma: no cover - overridden
        """A session outside a transaction."""
        raise NotImplementedError

    def write(self) -> AbstractContextManager[Session]:  # pragma: no cover - overridden
        """A session in one transaction: committed on exit, rolled back on any error."""
        raise NotImplementedError

    def to_time(self, moment: datetime) -> Any:  # pragma: no cover - overridden
        """Bind an aware datetime as the database stores it."""
        raise NotImplementedError

    def index(
        self, session: Session, seq_of: tuple[str, str], key: str, terms: Sequence[str]
    ) -> None:  # pragma: no cover - overridden
        """Index a just-inserted fact's `terms` (its ``(namespace, fact_id)`` is `seq_of`)."""
        raise NotImplementedError

    def insert_extra(self, terms: Sequence[str]) -> tuple[str, str, tuple[Any, ...]]:
        """Columns, value placeholders and values the fact row itself carries for search."""
        return "", "", ()

    def unindex(self, session: Session, seq: int) -> None:
        """Drop the search index entry of the fact row `seq` (before the row is deleted)."""

    def search(
        self, session: Session, args: SearchArgs, key: str, terms: Sequence[str]
    ) -> list[Row]:  # pragma: no cover - overridden
        """``(body, score)`` rows of the best `args.k` facts matching any of `terms`."""
        raise NotImplementedError

    def time_params(self, args: SearchArgs) -> tuple[Any, ...]:
        """The parameters of `_status_filter`."""
        params: tuple[Any, ...] = args.statuses
        if args.as_of is not None:
            moment = self.to_time(args.as_of)
            params += (moment, moment)
        return params


class SqliteSearch(Dialect):
    """The SQLite FTS5 half of the search (mixed into the SQLite dialect)."""

    def index(
        self, session: Session, seq_of: tuple[str, str], key: str, terms: Sequence[str]
    ) -> None:
        """Insert the fact's FTS5 row (rowid = the fact row's ``seq``)."""
        session.execute(
            "INSERT INTO memory_fts (rowid, ns, terms) SELECT seq, ?, ? FROM memory_facts "
            "WHERE namespace = ? AND fact_id = ?",
            (namespace_token(key), " ".join(terms), *seq_of),
        )

    def unindex(self, session: Session, seq: int) -> None:
        """Delete the fact's FTS5 row."""
        session.execute("DELETE FROM memory_fts WHERE rowid = ?", (seq,))

    def search(
        self, session: Session, args: SearchArgs, key: str, terms: Sequence[str]
    ) -> list[Row]:
        """FTS5 match in the namespace, ranked by ``bm25()`` (the namespace column weighs 0)."""
        query = (
            "SELECT f.body, -bm25(memory_fts, 0.0, 1.0) AS score FROM memory_fts "
            "JOIN memory_facts f ON f.seq = memory_fts.rowid "
            "WHERE memory_fts MATCH ? AND f.namespace = ?" + _status_filter(args) + _ORDER
        )
        params = (fts_match(key, terms), key, *self.time_params(args), args.k)
        return session.fetchall(query, params)


def tsvector_literal(terms: Sequence[str]) -> str:
    """A ``tsvector`` literal of `terms` with their positions (terms hold no quote/backslash)."""
    positions: dict[str, list[str]] = {}
    for position, term in enumerate(terms, start=1):
        positions.setdefault(term, []).append(str(min(position, 16383)))
    return " ".join(f"'{term}':{','.join(where)}" for term, where in positions.items())


def tsquery_literal(terms: Sequence[str]) -> str:
    """A ``tsquery`` literal: any of `terms`, each taken as it is (no parser, no stemming)."""
    return " | ".join(f"'{term}'" for term in terms)


_PG_SEARCH = f"""
WITH stats AS MATERIALIZED (
    SELECT count(*) AS n, coalesce(avg(doc_len), 1) AS avgdl
    FROM {{p}}memory_facts WHERE namespace = ?
), hits AS (
    SELECT f.seq, u.lexeme, cardinality(u.positions) AS tf, f.doc_len
    FROM {{p}}memory_facts f CROSS JOIN LATERAL unnest(f.terms) AS u
    WHERE f.namespace = ? AND f.terms @@ CAST(? AS tsquery) AND u.lexeme = ANY(?)
), df AS MATERIALIZED (
    SELECT lexeme, count(*) AS df FROM hits GROUP BY lexeme
), scored AS (
    SELECT h.seq, CAST(sum(
        ln(1 + (s.n - d.df + 0.5) / (d.df + 0.5))
        * h.tf * {K1 + 1} / (h.tf + {K1} * ({1 - B} + {B} * h.doc_len / s.avgdl))
    ) AS DOUBLE PRECISION) AS score
    FROM hits h JOIN df d ON d.lexeme = h.lexeme CROSS JOIN stats s
    GROUP BY h.seq
)
SELECT f.body, sc.score AS score FROM scored sc JOIN {{p}}memory_facts f ON f.seq = sc.seq
WHERE TRUE"""


class PostgresSearch(Dialect):
    """The PostgreSQL ``tsvector`` half of the search (mixed into the Postgres dialect)."""

    def insert_extra(self, terms: Sequence[str]) -> tuple[str, str, tuple[Any, ...]]:
        """The fact row's ``terms`` tsvector and ``doc_len``."""
        return ", terms, doc_len", ", CAST(? AS tsvector), ?", (tsvector_literal(terms), len(terms))

    def index(
        self, session: Session, seq_of: tuple[str, str], key: str, terms: Sequence[str]
    ) -> None:
        """Nothing: the row carries its tsvector (`insert_extra`)."""

    def search(
        self, session: Session, args: SearchArgs, key: str, terms: Sequence[str]
    ) -> list[Row]:
        """GIN-indexed OR match in the namespace, BM25 over the namespace's statistics."""
        query = self.sql(_PG_SEARCH) + _status_filter(args) + _ORDER
        params = (key, key, tsquery_literal(terms), list(terms), *self.time_params(args), args.k)
        return session.fetchall(query, params)


@contextmanager
def database_errors(errors: tuple[type[BaseException], ...], what: str) -> Iterator[None]:
    """Turn the driver's `errors` into `StorageError` (foldwise's own errors pass through)."""
    try:
        yield
    except errors as exc:
        raise StorageError(f"memory {what} failed: {type(exc).__name__}: {exc}") from exc
