"""The fuzzing area's hand-written requests: `RawCase`, the integer and the id cases.

Each `RawCase` is one request sent as raw bytes (so bodies can be invalid UTF-8, carry
duplicate keys, `NaN`, lone surrogates or 20,000 levels of nesting) with, when it knows which,
the field a 400/422 `detail` must name and the statuses it accepts. `int_cases` puts integers
past 64 bits (and BIGINT's own ends, NaN, 1e400, 5,000 digits) in every numeric parameter and
body field of the app's OpenAPI schema and in the free-JSON fields where an integer still
lands in a database; `id_cases` puts odd and boundary-length ids in every path parameter of
every route, the routes left out of the schema included. The transport cases are in
`_rel_fuzz_transport`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "HUGE_INTS",
    "NumberField",
    "RawCase",
    "id_cases",
    "int_cases",
    "integer_fields",
    "route_url",
]

HUGE_INTS = (2**63, 2**64, 2**64 + 1, -(2**63) - 1, -(2**64), 10**40)
"""Integers no SQL BIGINT holds: each is sent in every integer-bearing field."""

_BOUNDARY_INTS = (2**63 - 1, -(2**63), -1, 0)
"""Integers a BIGINT holds (including its ends): never a 5xx either."""


@dataclass(frozen=True)
class RawCase:
    """One hand-written request.

    Attributes:
        group: The batch it belongs to (the server's health is checked after each batch).
        name: What it sends, e.g. `huge-int POST /threads/search offset=2^64`.
        method: The HTTP method.
        url: Path and query, percent-encoded as sent.
        body: The raw body, or `None`.
        headers: Extra headers (`content-type` defaults to JSON when a body is sent).
        field: The field a 4xx `detail` must name, when the case knows it.
        expect: The statuses accepted (`None`: any status below 500).
        chunked: Send the body in chunks without `Content-Length`.
    """

    group: str
    name: str
    method: str
    url: str
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    field: str | None = None
    expect: frozenset[int] | None = None
    chunked: bool = False

    def request(self) -> dict[str, Any]:
        """Keyword arguments of `httpx.AsyncClient.request` (the body added by the sender)."""
        headers = {k.lower(): v.encode("utf-8") for k, v in self.headers}
        if self.body is not None and "content-type" not in headers:
            headers["content-type"] = b"application/json"
        return {"method": self.method, "url": self.url, "headers": headers}


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def route_url(path: str, ids: Mapping[str, str], **override: str) -> str:
    """`path` with its `{name}` parameters filled from `override`, else the seeded `ids`."""
    out = path
    for name, value in {**ids, **override}.items():
        out = out.replace("{" + name + ":path}", value).replace("{" + name + "}", value)
    return out


_HI = {"messages": [{"role": "user", "content": "hi"}]}

# A body each route accepts, so a case changes one thing at a time.
BASE_BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/threads/{thread_id}/runs/wait"): {"assistant_id": "agent", "input": _HI},
    ("POST", "/threads/{thread_id}/runs/stream"): {"assistant_id": "agent", "input": None},
    ("POST", "/threads/{thread_id}/runs"): {"assistant_id": "agent", "input": None},
    ("POST", "/runs/wait"): {"assistant_id": "agent", "input": _HI},
    ("POST", "/runs/stream"): {"assistant_id": "agent", "input": _HI},
    ("POST", "/runs"): {"assistant_id": "agent", "input": _HI},
    ("POST", "/runs/batch"): [{"assistant_id": "agent", "input": _HI}],
    ("POST", "/threads/{thread_id}/state/checkpoint"): {"checkpoint": {}},
    ("POST", "/threads/{thread_id}/compact"): {"force": False},
    ("PUT", "/store/items"): {"namespace": ["fuzz"], "key": "k", "value": {"a": 1}},
    ("DELETE", "/store/items"): {"namespace": ["fuzz"], "key": "k"},
    ("POST", "/memory/facts"): {"text": "I like tea"},
    ("PATCH", "/memory/facts/{fact_id}"): {"text": "I like coffee", "expected_revision": 1},
    ("POST", "/memory/search"): {"query": "tea"},
}

# Fields the schema types as free JSON (or not at all) where an integer still lands somewhere:
# a metadata filter, a TTL, a recursion limit, a stored value, a checkpoint id.
FREE_INT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("POST", "/threads", "metadata.n"),
    ("POST", "/threads", "ttl"),
    ("POST", "/threads", "thread_id"),
    ("PATCH", "/threads/{thread_id}", "metadata.n"),
    ("PATCH", "/threads/{thread_id}", "ttl"),
    ("POST", "/threads/search", "metadata.n"),
    ("POST", "/threads/search", "values.n"),
    ("POST", "/threads/count", "metadata.n"),
    ("POST", "/threads/count", "values.n"),
    ("POST", "/threads/{thread_id}/history", "metadata.n"),
    ("POST", "/threads/{thread_id}/history", "before"),
    ("POST", "/threads/{thread_id}/history", "checkpoint.checkpoint_id"),
    ("POST", "/threads/{thread_id}/state", "checkpoint_id"),
    ("POST", "/threads/{thread_id}/state", "values.n"),
    ("POST", "/threads/{thread_id}/state/checkpoint", "checkpoint.checkpoint_id"),
    ("POST", "/threads/{thread_id}/runs/wait", "config.recursion_limit"),
    ("POST", "/threads/{thread_id}/runs/wait", "metadata.n"),
    ("POST", "/threads/{thread_id}/runs/wait", "config.configurable.n"),
    ("POST", "/threads/{thread_id}/runs/wait", "context.n"),
    ("POST", "/threads/{thread_id}/runs/wait", "input.n"),
    ("POST", "/threads/{thread_id}/runs/wait", "checkpoint_id"),
    ("POST", "/threads/{thread_id}/runs/wait", "after_seconds"),
    ("POST", "/threads/{thread_id}/runs/stream", "metadata.n"),
    ("POST", "/threads/{thread_id}/runs", "metadata.n"),
    ("POST", "/runs/wait", "metadata.n"),
    ("POST", "/runs/wait", "config.recursion_limit"),
    ("POST", "/threads/{thread_id}/compact", "keep.value"),
    ("PUT", "/store/items", "value.n"),
    ("PUT", "/store/items", "ttl"),
    ("PUT", "/store/items", "key"),
    ("PUT", "/store/items", "namespace"),
    ("POST", "/store/items/search", "filter.n"),
    ("POST", "/store/items/search", "namespace_prefix"),
    ("POST", "/assistants/search", "metadata.n"),
    ("POST", "/assistants/count", "metadata.n"),
    ("POST", "/memory/facts", "text"),
    ("POST", "/memory/search", "as_of"),
)


def _resolve(schema: Mapping[str, Any], node: Any) -> Any:
    while isinstance(node, Mapping) and "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        node = schema["components"]["schemas"][name]
    return node


def _numeric(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The numeric schema of `node` (itself or one of its `anyOf` options), if any."""
    if node.get("type") in ("integer", "number"):
        return node
    for option in node.get("anyOf", ()):
        if isinstance(option, Mapping) and node.get("type") is None:
            found = _numeric(option)
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class NumberField:
    """A numeric field of the schema: where it is and the range it declares."""

    method: str
    path: str
    where: str
    name: str
    minimum: float | None
    maximum: float | None

    def refuses(self, value: int) -> bool:
        """Whether the schema's range excludes `value` (so the answer must be 422)."""
        low, high = self.minimum, self.maximum
        return (low is not None and value < low) or (high is not None and value > high)


def integer_fields(schema: Mapping[str, Any]) -> list[NumberField]:
    """Every numeric query parameter and top-level body field of the schema, with its range."""
    found: list[NumberField] = []

    def add(method: str, path: str, where: str, name: str, node: Mapping[str, Any]) -> None:
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum", node.get("exclusiveMaximum"))
        found.append(NumberField(method.upper(), path, where, name, low, high))

    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", ()):
                number = _numeric(parameter.get("schema", {}))
                if parameter.get("in") == "query" and number is not None:
                    add(method, path, "query", parameter["name"], number)
            content = operation.get("requestBody", {}).get("content", {})
            body = _resolve(schema, content.get("application/json", {}).get("schema"))
            if isinstance(body, Mapping):
                for name, prop in body.get("properties", {}).items():
                    number = _numeric(_resolve(schema, prop))
                    if number is not None:
                        add(method, path, "body", name, number)
    return found


def _with(base: Any, dotted: str, value: Any) -> Any:
    """A copy of the JSON `base` with `dotted` (`a.b.c`) set to `value`."""
    out = json.loads(json.dumps(base)) if base is not None else {}
    target = out[0] if isinstance(out, list) else out
    *parents, last = dotted.split(".")
    for key in parents:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    target[last] = value
    return out


def int_cases(schema: Mapping[str, Any], ids: Mapping[str, str]) -> Iterator[RawCase]:
    for number in integer_fields(schema):
        method, path, where, name = number.method, number.path, number.where, number.name
        base = BASE_BODIES.get((method, path), {})
        url = route_url(path, ids)
        for value in (*HUGE_INTS, *_BOUNDARY_INTS):
            label = f"int {method} {path} {name}={value}"
            expect = frozenset({422}) if number.refuses(value) else None
            if where == "query":
                yield RawCase(
                    "ints", label, method, f"{url}?{name}={value}", field=name, expect=expect
                )
            else:
                body = _json(_with(base, name, value))
                yield RawCase("ints", label, method, url, body, field=name, expect=expect)
        if where == "query":
            for raw in (
                "1e400",
                "NaN",
                "-Infinity",
                "0x10",
                "%00",
                "1%00",
                "%ff%fe",
                "",
                "9" * 400,
            ):
                yield RawCase(
                    "ints",
                    f"int {method} {path} {name}={raw!r}",
                    method,
                    f"{url}?{name}={raw}",
                    field=name,
                )
        else:
            for literal in (
                b"NaN",
                b"Infinity",
                b"-Infinity",
                b"1e400",
                b"1.5",
                b'"1"',
                b"9" * 5000,
            ):
                body = _json(_with(base, name, "__RAW__")).replace(b'"__RAW__"', literal)
                yield RawCase(
                    "ints",
                    f"num {method} {path} {name}={literal[:12]!r}",
                    method,
                    url,
                    body,
                    field=f"{name}|body",
                )
    for method, path, dotted in FREE_INT_FIELDS:
        base = BASE_BODIES.get((method, path), {})
        for value in HUGE_INTS[:2] + HUGE_INTS[3:4]:
            body = _json(_with(base, dotted, value))
            yield RawCase(
                "free-ints",
                f"int {method} {path} {dotted}={value}",
                method,
                route_url(path, ids),
                body,
                field=dotted.split(".")[0],
            )
        for literal in (b"NaN", b"-Infinity", b"1e400"):
            body = _json(_with(base, dotted, "__RAW__")).replace(b'"__RAW__"', literal)
            yield RawCase(
                "free-ints",
                f"num {method} {path} {dotted}={literal.decode()}",
                method,
                route_url(path, ids),
                body,
                field=dotted.split(".")[0],
            )


_ODD_IDS = (
    "..",
    "%2E%2E",
    "a%2Fb",
    "%00",
    "a%00b",
    "%ff%fe",
    "%ED%A0%80",
    "%C0%AF",
    "%20",
    "%E2%80%AE",
    "'%3B--",
    "%3Cscript%3E",
    "%5C..%5Cwin",
    "*",
    "%25",
    "null",
    "-1",
    str(2**64),
    "00000000-0000-0000-0000-000000000000",
    "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
    "%F0%9F%98%80",
    "%EF%BC%9C",
)
_ID_LENGTHS = (1, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1024, 4096)


def id_cases(
    schema: Mapping[str, Any], ids: Mapping[str, str], hidden: list[tuple[str, str]]
) -> Iterator[RawCase]:
    routes = [(m.upper(), p) for p, ops in schema.get("paths", {}).items() for m in ops]
    routes += [(m, p) for m, p in hidden if "{" in p]
    for method, path in routes:
        names = [
            part[1:-1].removesuffix(":path") for part in path.split("/") if part.startswith("{")
        ]
        base = BASE_BODIES.get((method, path))
        body = (
            _json(base)
            if base is not None
            else (b"{}" if method in ("POST", "PUT", "PATCH") else None)
        )
        for name in names:
            values = [*_ODD_IDS, *("x" * n for n in _ID_LENGTHS)]
            for value in values:
                url = route_url(path, ids, **{name: value})
                yield RawCase("ids", f"id {method} {path} {name}={value[:24]}", method, url, body)
