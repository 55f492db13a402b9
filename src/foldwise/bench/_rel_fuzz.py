"""Reliability area `fuzz`: the gateway fuzzed from its own OpenAPI schema and by hand.

Every route is fuzzed from `app.openapi()`, plus the hand-written malformed requests, against
the gateway in-process (issue 15, item 4).

Rows:

- **fuzzing, OpenAPI schema**: schemathesis (a dev dependency, imported lazily: the row says
  "skipped" without it) generates positive and negative cases for every operation of
  `app.openapi()`, half of them aimed at the seeded thread, run, checkpoint, artifact and fact;
- **fuzzing, malformed requests**: the cases of `_rel_fuzz_cases` (sizes around
  `gateway.max_body_bytes`, nesting, invalid UTF-8 / lone surrogates / NUL bytes, content
  types, duplicate and unknown keys, integers past 64 bits and NaN in every integer-bearing
  field, odd ids of every route, including the routes left out of the schema);
- the same on PostgreSQL when a URL is given (short form: the malformed cases, less the odd
  ids a text column takes like any other).

Every answer is checked by `check_response` (no 5xx, no traceback, a `detail` naming the field)
and `GET /ok` must answer 200 after each batch.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from foldwise.bench._rel_fuzz_cases import RawCase, id_cases, int_cases
from foldwise.bench._rel_fuzz_target import (
    FuzzTarget,
    Seeded,
    Sent,
    check_response,
    fuzz_config,
    hidden_routes,
)
from foldwise.bench._rel_fuzz_transport import transport_cases
from foldwise.bench._reliability import AreaOptions, AreaResult, Finding, area_command

__all__ = ["malformed_cases", "run", "run_backend", "run_malformed"]


def malformed_cases(
    schema: Mapping[str, Any], seeded: Seeded, hidden: list[tuple[str, str]]
) -> list[RawCase]:
    """Every hand-written case, in batches by `group` (`GET /ok` is checked between batches)."""
    ids = seeded.path_ids()
    return [*transport_cases(ids), *int_cases(schema, ids), *id_cases(schema, ids, hidden)]


def _send_raw(target: FuzzTarget, case: RawCase) -> httpx.Response:
    request = case.request()
    if case.body is not None:
        if case.chunked:
            body = case.body

            async def chunks() -> AsyncIterator[bytes]:
                for start in range(0, len(body), 8192):
                    yield body[start : start + 8192]

            request["content"] = _Deferred(chunks)
        else:
            request["content"] = case.body
    return target.send(request)


class _Deferred:
    """An async body built on the target's loop (an async generator cannot cross loops)."""

    def __init__(self, make: Callable[[], AsyncIterator[bytes]]) -> None:
        self.make = make

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.make()


def _check_raw(case: RawCase, response: httpx.Response) -> list[Finding]:
    sent = Sent(case.name, response.status_code, response.content, case.field)
    found = check_response(sent)
    if case.expect is not None and response.status_code not in case.expect:
        wanted = "/".join(str(s) for s in sorted(case.expect))
        text = response.text[:160]
        found.append(
            Finding(case.name, "status", f"{response.status_code} (wanted {wanted}): {text}")
        )
    return found


def run_malformed(
    target: FuzzTarget,
    area: str,
    command: str,
    *,
    keep: Callable[[RawCase], bool] | None = None,
) -> AreaResult:
    """Send the hand-written cases (`keep`: a subset); check each answer and, per batch, health."""
    start = time.perf_counter()
    schema = target.app.openapi()
    hidden = hidden_routes(target.app)
    cases = malformed_cases(schema, target.seeded, hidden)
    if keep is not None:
        cases = [case for case in cases if keep(case)]
    violations: list[Finding] = []
    statuses: Counter[int] = Counter()
    group = None
    for case in cases:
        if case.group != group:
            if group is not None and not target.healthy():
                violations.append(Finding(group, "healthy", "GET /ok failed after the batch"))
            group = case.group
        try:
            response = _send_raw(target, case)
        except Exception as error:  # the transport itself failed: the app raised through
            violations.append(
                Finding(case.name, "no-5xx", f"{type(error).__name__}: {error}"[:200])
            )
            continue
        statuses[response.status_code] += 1
        violations.extend(_check_raw(case, response))
    if not target.healthy():
        violations.append(Finding(str(group), "healthy", "GET /ok failed after the batch"))
    groups = Counter(case.group for case in cases)
    notes = [
        "cases by batch: " + ", ".join(f"{name} {count}" for name, count in groups.items()),
        "statuses: " + ", ".join(f"{s}×{n}" for s, n in sorted(statuses.items())),
        f"routes left out of the schema, covered here: {len(hidden)} "
        f"({', '.join(f'{m} {p}' for m, p in hidden)})",
    ]
    return AreaResult(area, len(cases), violations, command, time.perf_counter() - start, notes)


@contextmanager
def _target(options: AreaOptions, postgres: bool) -> Iterator[FuzzTarget]:
    workdir = options.workdir / ("fuzz-pg" if postgres else "fuzz-sqlite")
    workdir.mkdir(parents=True, exist_ok=True)
    url = None
    schema = f"foldwise_fuzz_{uuid.uuid4().hex[:10]}"
    if postgres:
        assert options.postgres_url is not None
        joiner = "&" if "?" in options.postgres_url else "?"
        url = f"{options.postgres_url}{joiner}schema={schema}"
    try:
        with FuzzTarget(fuzz_config(workdir, url)) as target:
            yield target
    finally:
        if postgres:
            _drop_schema(str(options.postgres_url), schema)


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    dsn = url.split("?", 1)[0]
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


SCHEMA_EXAMPLES = {False: 3, True: 50}
"""Examples per operation and generation mode: short form (`make test`), full form."""

_PG_SHORT_IDS = ("%00", "a%00b", "%ff%fe", "%ED%A0%80", "%C0%AF")
"""In the short form on PostgreSQL, the odd ids kept: those whose bytes a text column refuses."""


def _postgres_short(case: RawCase) -> bool:
    return case.group != "ids" or any(f"={odd}" in case.name for odd in _PG_SHORT_IDS)


def _rows(target: FuzzTarget, options: AreaOptions, backend: str, command: str) -> list[AreaResult]:
    from foldwise.bench._rel_fuzz_schema import run_schema

    postgres = backend == "PostgreSQL"
    rows: list[AreaResult] = []
    if options.full or not postgres:
        examples = SCHEMA_EXAMPLES[options.full]
        area = f"fuzzing, OpenAPI schema, {backend}"
        rows.append(run_schema(target, area, command, examples, options.seed))
    keep = _postgres_short if postgres and not options.full else None
    area = f"fuzzing, malformed requests, {backend}"
    rows.append(run_malformed(target, area, command, keep=keep))
    return rows


def run_backend(options: AreaOptions, *, postgres: bool) -> list[AreaResult]:
    """The rows of one backend (PostgreSQL needs `options.postgres_url`)."""
    backend = "PostgreSQL" if postgres else "SQLite"
    extra = ("--postgres $FOLDWISE_TEST_POSTGRES",) if postgres else ()
    command = area_command("fuzz", options, *extra)
    with _target(options, postgres=postgres) as target:
        return _rows(target, options, backend, command)


def run(options: AreaOptions) -> list[AreaResult]:
    """The fuzzing rows: schema-generated and hand-written cases, SQLite then PostgreSQL."""
    rows = run_backend(options, postgres=False)
    if options.postgres_url:
        rows.extend(run_backend(options, postgres=True))
    else:
        skipped = "skipped: no PostgreSQL URL (--postgres or $FOLDWISE_TEST_POSTGRES)"
        command = area_command("fuzz", options, "--postgres $FOLDWISE_TEST_POSTGRES")
        area = "fuzzing, malformed requests, PostgreSQL"
        rows.append(AreaResult(area, 0, [], command, notes=[skipped]))
    return rows
