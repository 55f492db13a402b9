"""Every route of the app, and the request a foreign identity sends to each (pure tables).

`app_routes` walks the app's routes, included routers and `include_in_schema=False` routes
alike (the web page's assets under `/ui` are public and skipped). `attempt_for` fills a route's
path with the owner's ids and gives it a body the route accepts, so the handler runs and the
ownership check, not body validation, answers. A route added later without an entry in
`BODIES` gets `{}` and is reported as not covered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BODIES",
    "OWNED_PARAMS",
    "Attempt",
    "app_routes",
    "attempt_for",
]

OWNED_PARAMS = ("thread_id", "run_id", "checkpoint_id", "artifact_id", "fact_id")
"""A route naming one of these is scoped to its owner: another identity gets 404."""

_SKIPPED = re.compile(r"^/(ui|docs|redoc)(/|$)")
_PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


def app_routes(app: Any) -> list[tuple[str, str]]:
    """`(method, path template)` of every route the app serves (HEAD and `/ui` left out)."""
    found: set[tuple[str, str]] = set()

    def walk(routes: Iterable[Any], prefix: str) -> None:
        for route in routes:
            path = getattr(route, "path", None)
            if path is None:  # an included router (FastAPI >= 0.165 keeps them nested)
                inner = getattr(route, "original_router", None) or getattr(route, "router", None)
                context = getattr(route, "include_context", None)
                walk(getattr(inner, "routes", []), prefix + str(getattr(context, "prefix", "")))
                continue
            full = prefix + str(path)
            if _SKIPPED.match(full):
                continue
            for method in getattr(route, "methods", None) or ():
                if method != "HEAD":
                    found.add((method, full))

    walk(app.routes, "")
    return sorted(found, key=lambda r: (r[0] == "DELETE", r[1], r[0]))


def _run(**extra: Any) -> dict[str, Any]:
    return {
        "assistant_id": "agent",
        "input": {"messages": [{"role": "user", "content": "show me everything you know"}]},
        **extra,
    }


BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/threads"): {"thread_id": "{thread_id}", "if_exists": "do_nothing"},
    ("POST", "/threads/search"): {"ids": ["{thread_id}"]},
    ("POST", "/threads/count"): {},
    ("POST", "/threads/overview"): {},
    ("PATCH", "/threads/{thread_id}"): {"metadata": {"owner": "mallory"}},
    ("POST", "/threads/{thread_id}/copy"): {},
    ("POST", "/threads/{thread_id}/history"): {"limit": 5},
    ("POST", "/threads/{thread_id}/state"): {
        "values": {"messages": [{"role": "user", "content": "planted"}]}
    },
    ("POST", "/threads/{thread_id}/state/checkpoint"): {
        "checkpoint": {"checkpoint_id": "{checkpoint_id}"}
    },
    ("POST", "/threads/{thread_id}/compact"): {},
    ("POST", "/threads/{thread_id}/runs"): _run(if_not_exists="create"),
    ("POST", "/threads/{thread_id}/runs/wait"): _run(if_not_exists="create"),
    ("POST", "/threads/{thread_id}/runs/stream"): _run(if_not_exists="create"),
    ("POST", "/threads/{thread_id}/runs/{run_id}/cancel"): None,
    ("POST", "/runs"): _run(config={"configurable": {"thread_id": "{thread_id}"}}),
    ("POST", "/runs/wait"): _run(config={"configurable": {"thread_id": "{thread_id}"}}),
    ("POST", "/runs/stream"): _run(config={"configurable": {"user_id": "alice"}}),
    ("POST", "/runs/batch"): [_run(config={"configurable": {"thread_id": "{thread_id}"}})],
    ("POST", "/assistants/search"): {},
    ("POST", "/assistants/count"): {},
    ("POST", "/assistants"): {"graph_id": "agent", "assistant_id": "agent"},
    ("PATCH", "/assistants/{assistant_id}"): {"metadata": {"x": 1}},
    ("POST", "/assistants/{assistant_id}/latest"): {"version": 1},
    ("POST", "/assistants/{assistant_id}/versions"): {},
    ("PUT", "/store/items"): {"namespace": ["notes"], "key": "{store_key}", "value": {"x": 1}},
    ("DELETE", "/store/items"): {"namespace": ["notes"], "key": "{store_key}"},
    ("POST", "/store/items/search"): {"namespace_prefix": ["notes"]},
    ("POST", "/store/namespaces"): {},
    ("POST", "/memory/facts"): {"text": "I live in Bobtown"},
    ("PATCH", "/memory/facts/{fact_id}"): {"text": "I live in Rome", "expected_revision": 1},
    ("POST", "/memory/search"): {"query": "{fact_word}"},
    ("POST", "/memory/quarantine/{fact_id}/approve"): None,
    ("POST", "/memory/quarantine/{fact_id}/reject"): None,
}
"""The body sent to each route that takes one (`None`: no body); `{name}` is filled in."""

QUERIES: dict[tuple[str, str], dict[str, str]] = {
    ("GET", "/store/items"): {"namespace": "notes", "key": "{store_key}"},
    ("GET", "/threads/{thread_id}/artifacts/{artifact_id}/search"): {"pattern": "{secret}"},
}


@dataclass(frozen=True)
class Attempt:
    """One request to one route.

    Attributes:
        method: HTTP method.
        template: The route's path template.
        url: The path filled with the owner's ids.
        body: JSON body or `None`.
        params: Query parameters.
        owned: Whether the route names an owned resource (another identity gets 404).
        covered: Whether `BODIES` knows the route (else `{}` was sent).
    """

    method: str
    template: str
    url: str
    body: Any
    params: dict[str, str]
    owned: bool
    covered: bool


def _fill(value: Any, ids: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _PARAM.sub(lambda m: ids.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [_fill(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


def attempt_for(method: str, template: str, ids: Mapping[str, str]) -> Attempt:
    """The request a foreign identity sends to `method template`, with the owner's `ids`."""
    params = [m.group(1) for m in _PARAM.finditer(template)]
    wants_body = method in ("POST", "PUT", "PATCH") or (method, template) in BODIES
    key = (method, template)
    return Attempt(
        method=method,
        template=template,
        url=_fill(template, ids),
        body=_fill(BODIES.get(key, {}), ids) if wants_body else None,
        params=_fill(QUERIES.get(key, {}), ids),
        owned=any(p in OWNED_PARAMS for p in params),
        covered=not wants_body or key in BODIES,
    )
