"""`SqlMemoryBackend`: facts in SQLite or PostgreSQL, one implementation over a small dialect.

Why sync DB-API code whose async twins run it in a worker thread
(`foldwise._steps.blocking_method`) rather than step generators over two drivers: memory needs
a blocking form (library runs and the CLI have no event loop) and a non-blocking one, and the SQL
is the same in both. Writing it once against stdlib `sqlite3` and sync `psycopg` and moving each
whole call off the loop keeps one code path, keeps a transaction on one thread from ``BEGIN``
to ``COMMIT``, and costs one thread hop per call, small next to a database round trip. The
gateway's own tables stay async-native (`aiosqlite`, async psycopg); both share the database
file or schema safely (WAL and busy timeout on SQLite, row locks on PostgreSQL).

Each fact is one row: its JSON body (the source of truth, so new `Fact` fields need no
migration) plus the columns that filters and ordering read. See `_sql_dialect` for the search
index of each database.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from foldwise._steps import blocking_method
from foldwise.errors import MemoryInputError
from foldwise.memory._backend_common import (
    WriteArgs,
    check_change,
    check_search,
    check_write,
    namespace_key,
    pack_vector,
    rank,
    similarity,
    unit_vector,
    unpack_vector,
)
from foldwise.memory._contracts import FactChange, MemoryCapabilities, ScoredFact
from foldwise.memory._facts import Fact, FactStatus, Namespace, Slot, check_namespace
from foldwise.memory._sql_dialect import Dialect, Session
from foldwise.memory._terms import index_terms, query_terms

__all__ = ["SqlMemoryBackend"]


_COLUMNS = (
    "namespace, fact_id, subject, attribute, status, confidence, valid_from, valid_to, "
    "recorded_at, revision, body, embedding"
)


class SqlMemoryBackend:
    """A `MemoryBackend` over a SQL `Dialect` (SQLite or PostgreSQL); see the module docstring.

    Use `foldwise.memory.open_backend` to build one from a URL. Call `setup` (or `asetup`)
    before use and `close` after.
    """

    capabilities = MemoryCapabilities(search=True, vector=True, transactions=True)

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def __repr__(self) -> str:
        return f"SqlMemoryBackend({self.dialect!r})"

    # lifecycle -------------------------------------------------------------------------------

    def setup(self) -> None:
        """Connect and create or migrate the ``memory_`` tables (idempotent)."""
        self.dialect.open()

    asetup = blocking_method(setup)

    def close(self) -> None:
        """Disconnect; safe to call twice."""
        self.dialect.close()

    aclose = blocking_method(close)

    # writes ----------------------------------------------------------------------------------

    def write(
        self,
        namespace: Namespace,
        *,
        new: Sequence[Fact] = (),
        changes: Sequence[FactChange] = (),
        embeddings: Sequence[Sequence[float] | None] = (),
    ) -> None:
        """Add `new` facts and apply `changes` in one transaction (see `MemoryBackend`)."""
        args = check_write(namespace, new, changes, embeddings)
        if not args.new and not args.changes:
            return
        key = namespace_key(args.namespace)
        with self.dialect.write() as session:
            updated = self._check_changes(session, args, key)
            for index, fact in enumerate(args.new):
                if self._find(session, key, fact.id) is not None:
                    raise MemoryInputError(
                        f"fact id {fact.id!r} already exists", field=f"new[{index}].id"
                    )
                self._insert(session, key, fact, args.embedding(index))
            for seq, fact in updated.values():
                session.execute(
                    self.dialect.sql(
                        "UPDATE {p}memory_facts SET status = ?, confidence = ?, valid_from = ?, "
                        "valid_to = ?, revision = ?, body = ? WHERE seq = ?"
                    ),
                    (
                        fact.status,
                        fact.confidence,
                        self._time(fact.valid_from),
                        self._time(fact.valid_to),
                        fact.revision,
                        fact.model_dump_json(),
                        seq,
                    ),
                )

    awrite = blocking_method(write)

    def _check_changes(
        self, session: Session, args: WriteArgs, key: str
    ) -> dict[str, tuple[int, Fact]]:
        new_ids = args.new_ids()
        updated: dict[str, tuple[int, Fact]] = {}
        for change in args.changes:
            stored = updated.get(change.fact_id) or self._find(
                session, key, change.fact_id, lock=True
            )
            target = change.superseded_by
            known = set(new_ids)
            if target is not None and (target in updated or self._find(session, key, target)):
                known.add(target)
            fact = check_change(change, None if stored is None else stored[1], known)
            assert stored is not None  # check_change raised otherwise
            updated[change.fact_id] = (stored[0], fact)
        return updated

    def _find(
        self, session: Session, key: str, fact_id: str, *, lock: bool = False
    ) -> tuple[int, Fact] | None:
        row = session.fetchone(
            self.dialect.sql(
                "SELECT seq, body FROM {p}memory_facts WHERE namespace = ? AND fact_id = ?"
            )
            + (self.dialect.lock if lock else ""),
            (key, fact_id),
        )
        return None if row is None else (int(row[0]), Fact.model_validate_json(row[1]))

    def _insert(
        self, session: Session, key: str, fact: Fact, embedding: Sequence[float] | None
    ) -> None:
        terms = index_terms(fact.text)
        columns, marks, extra = self.dialect.insert_extra(terms)
        session.execute(
            self.dialect.sql(f"INSERT INTO {{p}}memory_facts ({_COLUMNS}{columns}) ")
            + f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?{marks})",
            (
                key,
                fact.id,
                fact.subject,
                fact.attribute,
                fact.status,
                fact.confidence,
                self._time(fact.valid_from),
                self._time(fact.valid_to),
                self._time(fact.recorded_at),
                fact.revision,
                fact.model_dump_json(),
                None if embedding is None else pack_vector(embedding),
                *extra,
            ),
        )
        self.dialect.index(session, (key, fact.id), key, terms)

    def _time(self, moment: datetime | None) -> Any:
        return None if moment is None else self.dialect.to_time(moment)

    def delete(self, namespace: Namespace, fact_id: str) -> bool:
        """Delete one fact for real (an explicit forget); `False` if it was not there."""
        key = namespace_key(check_namespace(namespace))
        with self.dialect.write() as session:
            found = self._find(session, key, fact_id, lock=True)
            if found is None:
                return False
            self.dialect.unindex(session, found[0])
            session.execute(
                self.dialect.sql("DELETE FROM {p}memory_facts WHERE seq = ?"), (found[0],)
            )
        return True

    adelete = blocking_method(delete)

    # reads -----------------------------------------------------------------------------------

    def get(self, namespace: Namespace, fact_id: str) -> Fact | None:
        """The fact with this id in this namespace, or `None`."""
        key = namespace_key(check_namespace(namespace))
        with self.dialect.read() as session:
            found = self._find(session, key, fact_id)
        return None if found is None else found[1]

    aget = blocking_method(get)

    def list_facts(
        self,
        namespace: Namespace,
        *,
        status: FactStatus | None = None,
        slot: Slot | None = None,
        limit: int | None = None,
    ) -> list[Fact]:
        """The namespace's facts, oldest recorded first, optionally of one status or slot."""
        key = namespace_key(check_namespace(namespace))
        query = "SELECT body FROM {p}memory_facts WHERE namespace = ?"
        params: list[Any] = [key]
        if status is not None:
            query += " AND status = ?"
            params.append(status)
        if slot is not None:
            query += " AND subject = ? AND attribute = ?"
            params.extend(slot)
        query += " ORDER BY recorded_at, seq"
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise MemoryInputError("must be a non-negative integer", field="limit")
            query += " LIMIT ?"
            params.append(limit)
        with self.dialect.read() as session:
            rows = session.fetchall(self.dialect.sql(query), params)
        return [Fact.model_validate_json(row[0]) for row in rows]

    alist_facts = blocking_method(list_facts)

    def search(
        self,
        namespace: Namespace,
        query: str,
        *,
        k: int = 5,
        statuses: Sequence[FactStatus] = ("active",),
        as_of: datetime | None = None,
    ) -> list[ScoredFact]:
        """The `k` best lexical matches for `query` (BM25 over `_terms` terms)."""
        args = check_search(namespace, k, statuses, as_of)
        if not isinstance(query, str):
            raise MemoryInputError("must be a string", field="query")
        terms = query_terms(query)
        if not terms or not args.statuses:
            return []
        with self.dialect.read() as session:
            rows = self.dialect.search(session, args, namespace_key(args.namespace), terms)
        hits = [
            ScoredFact(fact=Fact.model_validate_json(body), score=float(score))
            for body, score in rows
        ]
        return rank(hits, args.k)

    asearch = blocking_method(search)

    def search_vector(
        self,
        namespace: Namespace,
        vector: Sequence[float],
        *,
        k: int = 5,
        statuses: Sequence[FactStatus] = ("active",),
        as_of: datetime | None = None,
    ) -> list[ScoredFact]:
        """The `k` facts whose stored embedding is most cosine-similar to `vector`."""
        args = check_search(namespace, k, statuses, as_of)
        probe = unit_vector(vector, "vector")
        if not args.statuses:
            return []
        marks = ", ".join("?" for _ in args.statuses)
        query = (
            "SELECT f.body, f.embedding FROM {p}memory_facts f WHERE f.namespace = ? "
            f"AND f.embedding IS NOT NULL AND f.status IN ({marks})"
        )
        if args.as_of is not None:
            query += " AND f.valid_from <= ? AND (f.valid_to IS NULL OR f.valid_to > ?)"
        params = (namespace_key(args.namespace), *self.dialect.time_params(args))
        with self.dialect.read() as session:
            rows = session.fetchall(self.dialect.sql(query), params)
        hits = []
        for body, embedding in rows:
            score = similarity(probe, unpack_vector(bytes(embedding)))
            if score is not None:
                hits.append(ScoredFact(fact=Fact.model_validate_json(body), score=score))
        return rank(hits, args.k)

    asearch_vector = blocking_method(search_vector)
