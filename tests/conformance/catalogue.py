"""The conformance calls: their routes, LangGraph-shaped result checks and the docs table.

Both harnesses (tests/js/conformance.mjs, tests/conformance/python_sdk.py) run these calls in
this order and report ``{call, ok, status?, error?, detail}``; `check` says whether a successful
call's `detail` (see `python_sdk.summarize`) has the shape LangGraph Server answers with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CALLS", "COMPAT_END", "COMPAT_START", "Call", "render_table", "replace_section"]

COMPAT_START = "<!-- compat:start -->"
COMPAT_END = "<!-- compat:end -->"

Detail = Mapping[str, Any]


@dataclass(frozen=True)
class Call:
    """One SDK call: JS and Python method names, the route, the shape check, a docs note."""

    name: str
    python: str
    route: str
    check: Callable[[Detail], bool]
    note: str = ""


def _keys(detail: Detail, *keys: str) -> bool:
    return detail.get("kind") == "object" and set(keys) <= set(detail.get("keys", ()))


def _items(detail: Detail, *keys: str) -> bool:
    item = detail.get("item") or {}
    return detail.get("kind") == "array" and detail.get("length", 0) >= 1 and _keys(item, *keys)


def _answer(detail: Detail) -> bool:
    """Final state values of a run: the messages channel, ending with the AI's answer."""
    return _keys(detail, "messages") and detail.get("last_type") == "ai"


def _stream(*events: str) -> Callable[[Detail], bool]:
    def check(detail: Detail) -> bool:
        seen = set(detail.get("events", ()))
        return detail.get("kind") == "stream" and {"metadata", *events} <= seen

    return check


_THREAD = ("thread_id", "status", "metadata", "created_at", "updated_at")
_STATE = ("values", "next", "checkpoint", "metadata", "created_at", "tasks")
_RUN = ("run_id", "thread_id", "assistant_id", "status", "created_at")
_ASSISTANT = ("assistant_id", "graph_id", "name", "config", "metadata", "version")
_STREAM_EVENTS = {
    "values": ("values",),
    "updates": ("updates",),
    "messages": (),  # messages/partial, /complete and /metadata; checked below
    "messages-tuple": ("messages",),
    "events": ("events",),
    "debug": ("debug",),
    "tasks": ("tasks",),
    "checkpoints": ("checkpoints",),
    "custom": (),  # the agent writes no custom events: a clean stream is the contract
}


def _legacy_messages(detail: Detail) -> bool:
    events = set(detail.get("events", ()))
    return _stream()(detail) and bool({"messages/partial", "messages/complete"} & events)


def _stream_calls() -> list[Call]:
    calls = []
    for mode, events in _STREAM_EVENTS.items():
        check = _legacy_messages if mode == "messages" else _stream(*events)
        route = "POST /threads/{id}/runs/stream"
        calls.append(Call(f"runs.stream[{mode}]", f"runs.stream[{mode}]", route, check))
    return calls


_ITEM = ("namespace", "key", "value", "created_at", "updated_at")


def _null(detail: Detail) -> bool:
    return detail.get("kind") == "null"


def _store_calls() -> list[Call]:
    """`client.store.*`: one tenant per identity; namespaces come back without its label."""
    return [
        Call("store.putItem", "store.put_item", "PUT /store/items", _null, "204"),
        Call("store.getItem", "store.get_item", "GET /store/items",
             lambda d: _keys(d, *_ITEM), "`?namespace=a.b&key=k`, as the SDKs send it"),
        Call("store.getItem[missing]", "store.get_item", "GET /store/items", _null,
             "a missing item is `null` (200), as in LangGraph Server"),
        Call("store.searchItems", "store.search_items", "POST /store/items/search",
             lambda d: _items(d, *_ITEM, "score"),
             "`filter`, `limit`, `offset`; `query` is accepted but ranks nothing "
             "(no semantic index)"),
        Call("store.listNamespaces", "store.list_namespaces", "POST /store/namespaces",
             lambda d: d.get("kind") == "array" and d.get("length", 0) >= 1
             and (d.get("item") or {}).get("kind") == "array",
             "`prefix`, `suffix`, `max_depth`; a leading `*` in `suffix` is a 422"),
        Call("store.deleteItem", "store.delete_item", "DELETE /store/items", _null,
             "then store.get_item: `null`"),
    ]  # fmt: skip


CALLS: tuple[Call, ...] = (
    Call("assistants.search", "assistants.search", "POST /assistants/search",
         lambda d: _items(d, *_ASSISTANT), "the configured agents; POST /assistants is 405"),
    Call("assistants.get", "assistants.get", "GET /assistants/{id}",
         lambda d: _keys(d, *_ASSISTANT)),
    Call("assistants.getGraph", "assistants.get_graph", "GET /assistants/{id}/graph",
         lambda d: _keys(d, "nodes", "edges")),
    Call("assistants.getSchemas", "assistants.get_schemas", "GET /assistants/{id}/schemas",
         lambda d: _keys(d, "input_schema", "output_schema", "state_schema", "config_schema")),
    Call("threads.create", "threads.create", "POST /threads",
         lambda d: _keys(d, *_THREAD) and d.get("status") == "idle"),
    Call("threads.get", "threads.get", "GET /threads/{id}", lambda d: _keys(d, *_THREAD)),
    Call("threads.update", "threads.update", "PATCH /threads/{id}",
         lambda d: _keys(d, "thread_id", "metadata")),
    Call("threads.search", "threads.search", "POST /threads/search",
         lambda d: _items(d, *_THREAD)),
    Call("threads.count", "threads.count", "POST /threads/count",
         lambda d: d.get("kind") == "number" and d.get("value", 0) >= 1),
    Call("runs.wait", "runs.wait", "POST /threads/{id}/runs/wait", _answer),
    *_stream_calls(),
    Call("runs.stream[subgraphs]", "runs.stream(stream_subgraphs=True)",
         "POST /threads/{id}/runs/stream", _stream("values", "updates"),
         "`values` + `updates` with `stream_subgraphs`"),
    Call("threads.getState", "threads.get_state", "GET /threads/{id}/state",
         lambda d: _keys(d, *_STATE) and d.get("messages", 0) >= 2),
    Call("threads.getHistory", "threads.get_history", "POST /threads/{id}/history",
         lambda d: _items(d, *_STATE)),
    Call("threads.getState[checkpoint_id]", "threads.get_state(checkpoint_id=…)",
         "GET /threads/{id}/state/{checkpoint_id}", lambda d: _keys(d, *_STATE)),
    Call("runs.stream[checkpoint]", "runs.stream(checkpoint=…)",
         "POST /threads/{id}/runs/stream", _stream("values", "messages"),
         "`checkpoint` of the head, as agent-chat-ui sends"),
    Call("runs.stream[useStream]", "runs.stream(checkpoint=…, stream_resumable=True)",
         "POST /threads/{id}/runs/stream", _stream("values", "messages"),
         "useStream's body: head checkpoint, stream_resumable, on_disconnect continue"),
    Call("runs.wait[input=null]", "runs.wait(input=None)", "POST /threads/{id}/runs/wait",
         lambda d: _keys(d, "messages")),
    Call("threads.updateState", "threads.update_state", "POST /threads/{id}/state",
         lambda d: _keys(d, "checkpoint") or _keys(d, "configurable")),
    Call("threads.copy", "threads.copy", "POST /threads/{id}/copy", lambda d: _keys(d, *_THREAD)),
    Call("runs.list", "runs.list", "GET /threads/{id}/runs", lambda d: _items(d, *_RUN)),
    Call("runs.get", "runs.get", "GET /threads/{id}/runs/{run_id}",
         lambda d: _keys(d, *_RUN) and d.get("status") == "success"),
    Call("runs.create", "runs.create", "POST /threads/{id}/runs",
         lambda d: _keys(d, *_RUN) and d.get("status") in ("pending", "running")),
    Call("runs.join", "runs.join", "GET /threads/{id}/runs/{run_id}/join", _answer),
    Call("runs.joinStream", "runs.join_stream", "GET /threads/{id}/runs/{run_id}/stream",
         lambda d: d.get("kind") == "stream"),
    Call("runs.cancel", "runs.cancel", "POST /threads/{id}/runs/{run_id}/cancel",
         lambda d: _keys(d, *_RUN) and d.get("status") == "interrupted",
         "then runs.get: status `interrupted`"),
    Call("runs.create[enqueue]", 'runs.create(multitask_strategy="enqueue")',
         "POST /threads/{id}/runs",
         lambda d: _keys(d, *_RUN) and d.get("status") == "pending",
         "queued behind a busy run: `pending`"),
    Call("runs.join[enqueued]", "runs.join", "GET /threads/{id}/runs/{run_id}/join", _answer,
         "the queued run, once it ran"),
    Call("runs.create[rollback]", 'runs.create(multitask_strategy="rollback")',
         "POST /threads/{id}/runs",
         lambda d: _keys(d, *_RUN),
         "the busy run is cancelled and deleted (then runs.get: 404)"),
    Call("runs.cancel[rollback]", 'runs.cancel(action="rollback")',
         "POST /threads/{id}/runs/{run_id}/cancel", lambda d: d.get("kind") == "null",
         "then runs.get: 404"),
    Call("runs.wait[stateless]", "runs.wait(None, …)", "POST /runs/wait", _answer),
    Call("runs.stream[stateless]", "runs.stream(None, …)", "POST /runs/stream",
         _stream("values")),
    Call("threads.delete", "threads.delete", "DELETE /threads/{id}",
         lambda d: d.get("kind") == "null", "then threads.get: 404"),
    *_store_calls(),
)  # fmt: skip


def _cell(result: Mapping[str, Any] | None, supported: bool) -> str:
    if result is None:
        return "not run"
    if supported:
        return "yes"
    if result.get("ok"):
        return "no (result shape differs)"
    status = result.get("status")
    if status:
        return f"no ({status})"
    error = str(result.get("error", ""))
    return f"not run ({error.removeprefix('no id: ')})" if error.startswith("no id:") else "no"


def render_table(
    results: Mapping[str, Sequence[Mapping[str, Any]]],
    supported: Mapping[str, frozenset[str] | set[str]],
) -> str:
    """The compatibility table (markdown) from the observed results of each client.

    Args:
        results: Per client (``"js"``, ``"python"``), the harness's result lines.
        supported: Per client, the calls that succeeded with a LangGraph-shaped result.
    """
    by_client = {client: {r["call"]: r for r in lines} for client, lines in results.items()}
    rows = [
        "| SDK call (JS / Python) | Route | JS SDK 1.15.0 | Python SDK | Notes |",
        "|---|---|---|---|---|",
    ]
    for call in CALLS:
        names = f"`{call.name}`" + ("" if call.python == call.name else f" / `{call.python}`")
        cells = [
            _cell(by_client.get(client, {}).get(call.name), call.name in supported.get(client, ()))
            for client in ("js", "python")
        ]
        rows.append(f"| {names} | `{call.route}` | {cells[0]} | {cells[1]} | {call.note} |")
    return "\n".join(rows) + "\n"


def replace_section(document: str, table: str) -> str:
    """`document` with the text between the compat markers replaced by `table`."""
    head, start, rest = document.partition(COMPAT_START)
    _, end, tail = rest.partition(COMPAT_END)
    if not start or not end:
        raise ValueError(f"the document has no {COMPAT_START} … {COMPAT_END} section")
    return f"{head}{COMPAT_START}\n{table}{COMPAT_END}{tail}"
