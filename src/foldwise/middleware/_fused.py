"""`fuse`: run several middlewares' hooks as one graph node per hook.

LangChain's `create_agent` gives every `before_model`, `after_model` and `before_agent` hook its
own node, and LangGraph saves a checkpoint after every node. foldwise's stack has four such
hooks around each model call, so a one-call turn wrote eight checkpoints where a plain agent
writes three. `fuse` keeps the members' behaviour and order and writes fewer:

- `before_agent` / `before_model` / `after_agent`: the members' hooks run one after another in
  one node, each seeing the state as the hooks before it left it (their updates applied with
  the channels' reducers); the node writes all their updates in that order.
- `after_model` runs inside the model node, on the state the model's answer makes, and its
  update is written with the answer (`ExtendedModelResponse`), so there is no node after it.
  With `fold_after_model=False` it keeps a node of its own instead: a middleware placed after
  the members with its own `after_model` then runs first, as LangChain orders after-hooks (it
  may change the answer or jump away before the members see it).
- `wrap_model_call` / `wrap_tool_call` compose as LangChain composes them: first member outermost.
- With `runs_have_ids` (every invocation's config carries a `run_id`, as in the gateway), the
  `before_agent` hooks run in the first `before_model` node of each run instead of a node of
  their own: a run id not seen before on the thread starts a run. A call without a run id is
  taken as a new run (the hooks run again: slower, never wrong for foldwise's own).

The members are never changed: `build_middlewares` still returns them one by one, usable with
LangChain's own `create_agent`. A hook that can jump (`can_jump_to`) cannot be fused.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, Required, get_args, get_origin, get_type_hints

from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from foldwise._lru import LRUDict
from foldwise._steps import Io, Steps, blocking, run_async, run_sync
from foldwise._thread_id import resolve_thread_id

__all__ = ["fuse", "has_hook"]

_STATE_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
_ALL_HOOKS = (*_STATE_HOOKS, "wrap_model_call", "wrap_tool_call")


def has_hook(member: AgentMiddleware[Any, Any, Any], hook: str) -> bool:
    """Whether `member` overrides `hook` or its async twin (LangChain's own test)."""
    cls = type(member)
    return any(
        getattr(cls, name) is not getattr(AgentMiddleware, name) for name in (hook, "a" + hook)
    )


def _jumps(member: AgentMiddleware[Any, Any, Any], hook: str) -> bool:
    return any(
        getattr(getattr(type(member), name), "__can_jump_to__", None) for name in (hook, "a" + hook)
    )


@dataclass(frozen=True, slots=True)
class _Channel:
    reducer: Callable[[Any, Any], Any]
    empty: Callable[[], Any] | None


def _channels(schemas: Iterable[type[Any]]) -> dict[str, _Channel]:
    """The reducer channels of the state schemas (LangGraph's rule: last callable metadata)."""
    found: dict[str, _Channel] = {}
    for schema in schemas:
        for key, hint in get_type_hints(schema, include_extras=True).items():
            while get_origin(hint) in (NotRequired, Required):
                hint = get_args(hint)[0]
            meta = getattr(hint, "__metadata__", ())
            if meta and callable(meta[-1]):
                base = get_origin(hint.__origin__) or hint.__origin__
                found[key] = _Channel(meta[-1], base if callable(base) else None)
    return found


class _Writes:
    """Hook updates applied to a view of the state, and kept in order for one node's return."""

    def __init__(self, state: Any, channels: dict[str, _Channel]) -> None:
        self.view = state
        self.channels = channels
        self.updates: list[dict[str, Any]] = []

    def add(self, update: Any) -> None:
        if not update:
            return
        if not isinstance(update, dict):
            raise TypeError(f"a fused hook returned {type(update).__name__}, not a dict update")
        view = dict(self.view)
        for key, value in update.items():
            channel = self.channels.get(key)
            if channel is None:
                view[key] = value
                continue
            if key in view and view[key] is not None:
                view[key] = channel.reducer(view[key], value)
            elif channel.empty is not None:
                view[key] = channel.reducer(channel.empty(), value)
            else:
                view[key] = value
        self.view = view
        self.updates.append(update)

    def pairs(self) -> list[tuple[str, Any]]:
        """Every write in order; a key without a reducer keeps only its last value."""
        last = {key: index for index, update in enumerate(self.updates) for key in update}
        return [
            (key, value)
            for index, update in enumerate(self.updates)
            for key, value in update.items()
            if key in self.channels or last[key] == index
        ]

    def result(self) -> dict[str, Any] | Command[Any] | None:
        """One dict when no key is written twice, else a `Command` carrying every write."""
        if not self.updates:
            return None
        if len(self.updates) == 1:
            return self.updates[0]
        pairs = self.pairs()
        keys = [key for key, _ in pairs]
        if len(set(keys)) == len(keys):
            return dict(pairs)
        return Command(update=pairs)


class _RunStarts:
    """Per thread, the run id of the last model call: a different one starts a run."""

    def __init__(self) -> None:
        self._last: LRUDict[str, str] = LRUDict(10_000)

    def started(self, runtime: Runtime[Any]) -> bool:
        info = getattr(runtime, "execution_info", None)
        run_id = getattr(info, "run_id", None)
        if run_id is None:
            return True
        thread = resolve_thread_id(runtime)
        if self._last.get(thread) == run_id:
            return False
        self._last[thread] = run_id
        return True


def _hook_io(member: AgentMiddleware[Any, Any, Any], hook: str, *args: Any) -> Io[Any]:
    """Call a member's hook with the driver's form (a sync-only hook runs off the loop).

    An async-only hook fails a sync run, as LangChain's own node does (the base class's sync
    hook would return None: the hook would be skipped without a word).
    """
    cls = type(member)
    sync = getattr(member, hook)
    if getattr(cls, hook) is getattr(AgentMiddleware, hook):
        sync = functools.partial(_async_only, f"{member.name}.{hook}")
    if getattr(cls, "a" + hook) is not getattr(AgentMiddleware, "a" + hook):
        return Io(sync, getattr(member, "a" + hook), args, {})
    return Io(sync, blocking(sync), args, {})


def _async_only(hook: str, *_: Any) -> None:
    raise TypeError(
        f"{hook} has only an async form (a{hook.rpartition('.')[2]}): run the agent "
        "with ainvoke / astream"
    )


class _Fused(AgentMiddleware[Any, Any, Any]):
    """The members' hooks, one node per hook (see the module docstring)."""

    def __init__(
        self,
        members: Sequence[AgentMiddleware[Any, Any, Any]],
        name: str,
        hooked: dict[str, list[AgentMiddleware[Any, Any, Any]]],
        runs: _RunStarts | None,
        fold_after_model: bool = True,
    ) -> None:
        super().__init__()
        self.members = tuple(members)
        self._name = name
        self._runs = runs
        self._fold_after_model = fold_after_model
        self.tools = [tool for member in self.members for tool in getattr(member, "tools", ())]
        self._channels = _channels(member.state_schema for member in self.members)
        # LangChain runs after-hooks last member first.
        self._hooked = {
            hook: users[::-1] if hook.startswith("after_") else list(users)
            for hook, users in hooked.items()
        }

    @property
    def name(self) -> str:
        return self._name

    def _sequence_steps(self, hook: str, state: Any, runtime: Runtime[Any]) -> Steps[_Writes]:
        writes = _Writes(state, self._channels)
        for member in self._hooked[hook]:
            writes.add((yield _hook_io(member, hook, writes.view, runtime)))
        return writes

    def _node_steps(self, hook: str, state: Any, runtime: Runtime[Any]) -> Steps[Any]:
        writes = _Writes(state, self._channels)
        hooks = [hook]
        if hook == "before_model" and self._runs is not None and self._runs.started(runtime):
            hooks = ["before_agent", hook]
        for name in hooks:
            for member in self._hooked[name]:
                writes.add((yield _hook_io(member, name, writes.view, runtime)))
        return writes.result()

    # -- hooks: `fuse` installs each under its LangChain name only when a member has it, ----
    # -- since LangChain adds a node for every hook a middleware class overrides. ------------

    def _fused_before_agent(self, state: Any, runtime: Runtime[Any]) -> Any:
        return run_sync(self._node_steps("before_agent", state, runtime))

    async def _fused_abefore_agent(self, state: Any, runtime: Runtime[Any]) -> Any:
        return await run_async(self._node_steps("before_agent", state, runtime))

    def _fused_before_model(self, state: Any, runtime: Runtime[Any]) -> Any:
        return run_sync(self._node_steps("before_model", state, runtime))

    async def _fused_abefore_model(self, state: Any, runtime: Runtime[Any]) -> Any:
        return await run_async(self._node_steps("before_model", state, runtime))

    def _fused_after_model(self, state: Any, runtime: Runtime[Any]) -> Any:
        return run_sync(self._node_steps("after_model", state, runtime))

    async def _fused_aafter_model(self, state: Any, runtime: Runtime[Any]) -> Any:
        return await run_async(self._node_steps("after_model", state, runtime))

    def _fused_after_agent(self, state: Any, runtime: Runtime[Any]) -> Any:
        return run_sync(self._node_steps("after_agent", state, runtime))

    async def _fused_aafter_agent(self, state: Any, runtime: Runtime[Any]) -> Any:
        return await run_async(self._node_steps("after_agent", state, runtime))

    # -- the model call, with after_model folded in --------------------------------------------

    def _finish_steps(
        self, request: ModelRequest[Any], response: ModelResponse[Any], commands: list[Command[Any]]
    ) -> Steps[ModelResponse[Any] | ExtendedModelResponse[Any]]:
        """Run the after_model hooks on the state the answer makes; write with the answer."""
        pairs: list[tuple[str, Any]] = []
        for command in commands:
            pairs.extend(command._update_as_tuples())
        if self._fold_after_model and self._hooked["after_model"]:
            state: dict[str, Any] = dict(request.state)
            state["messages"] = [*(state.get("messages") or []), *response.result]
            writes = yield from self._sequence_steps("after_model", state, request.runtime)
            pairs.extend(writes.pairs())
        if not pairs:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=pairs))

    def _fused_wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        commands: list[Command[Any]] = []
        layers = self._hooked["wrap_model_call"]

        def layer(index: int, sent: ModelRequest[Any]) -> ModelResponse[Any]:
            if index == len(layers):
                return _unwrap(handler(sent), commands)
            start = len(commands)

            def inner(again: ModelRequest[Any]) -> ModelResponse[Any]:
                del commands[start:]  # as LangChain: only the last attempt's writes count
                return layer(index + 1, again)

            return _unwrap(layers[index].wrap_model_call(sent, inner), commands)

        response = layer(0, request)
        return run_sync(self._finish_steps(request, response, commands))

    async def _fused_awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        commands: list[Command[Any]] = []
        layers = self._hooked["wrap_model_call"]

        async def layer(index: int, sent: ModelRequest[Any]) -> ModelResponse[Any]:
            if index == len(layers):
                return _unwrap(await handler(sent), commands)
            start = len(commands)

            async def inner(again: ModelRequest[Any]) -> ModelResponse[Any]:
                del commands[start:]  # as LangChain: only the last attempt's writes count
                return await layer(index + 1, again)

            return _unwrap(await layers[index].awrap_model_call(sent, inner), commands)

        response = await layer(0, request)
        return await run_async(self._finish_steps(request, response, commands))

    # -- tool calls ----------------------------------------------------------------------------

    def _fused_wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Any],
    ) -> Any:
        layers = self._hooked["wrap_tool_call"]

        def layer(index: int, sent: ToolCallRequest) -> Any:
            if index == len(layers):
                return handler(sent)
            return layers[index].wrap_tool_call(sent, functools.partial(layer, index + 1))

        return layer(0, request)

    async def _fused_awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Any]],
    ) -> Any:
        layers = self._hooked["wrap_tool_call"]

        async def layer(index: int, sent: ToolCallRequest) -> Any:
            if index == len(layers):
                return await handler(sent)
            return await layers[index].awrap_tool_call(sent, functools.partial(layer, index + 1))

        return await layer(0, request)


def _unwrap(result: Any, commands: list[Command[Any]]) -> ModelResponse[Any]:
    """A layer's result as a `ModelResponse`; an `ExtendedModelResponse`'s command is kept."""
    if isinstance(result, ExtendedModelResponse):
        if result.command is not None:
            commands.append(result.command)
        return result.model_response
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result])
    return result  # type: ignore[no-any-return]


class _Schema(AgentMiddleware[Any, Any, Any]):
    """No hooks: only carries a member's state schema into `create_agent`."""

    def __init__(self, schema: type[Any], name: str) -> None:
        super().__init__()
        self.state_schema = schema
        self._name = name

    @property
    def name(self) -> str:
        return self._name


_NODE_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")


def fuse(
    members: Sequence[AgentMiddleware[Any, Any, Any]],
    *,
    name: str,
    skip: Iterable[tuple[AgentMiddleware[Any, Any, Any], str]] = (),
    runs_have_ids: bool = False,
    fold_after_model: bool = True,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The middlewares to pass to `create_agent` in place of `members`, in the same order.

    The first is the fused middleware, named `name` (its nodes are `{name}.before_model`, …);
    the rest carry the members' state schemas and add no nodes. `skip` names hooks another
    member already runs itself (`(member, "before_model")`), left out of the fused node.
    `runs_have_ids`: run the `before_agent` hooks in a run's first `before_model` node (see the
    module docstring). `fold_after_model=False`: the `after_model` hooks keep a node of their
    own (pass it when a middleware after the members has an `after_model` hook).

    Raises:
        ValueError: A member's hook can jump (`can_jump_to`), or `members` is empty.
    """
    if not members:
        raise ValueError("fuse needs at least one middleware")
    for member in members:
        for hook in _STATE_HOOKS:
            if _jumps(member, hook):
                raise ValueError(f"{member.name}.{hook} can jump; it cannot be fused")
    skipped = {(id(member), hook) for member, hook in skip}
    hooked = {
        hook: [m for m in members if has_hook(m, hook) and (id(m), hook) not in skipped]
        for hook in _ALL_HOOKS
    }
    installed = {hook for hook, users in hooked.items() if users}
    if "after_model" in installed and fold_after_model:
        installed.add("wrap_model_call")  # after_model runs inside the model call
        installed.discard("after_model")
    runs = None
    if runs_have_ids and "before_agent" in installed:
        installed.discard("before_agent")  # runs in the first before_model node of a run
        installed.add("before_model")
        runs = _RunStarts()
    namespace: dict[str, Any] = {}
    for hook in (*_NODE_HOOKS, "wrap_model_call", "wrap_tool_call"):
        if hook in installed:
            namespace[hook] = getattr(_Fused, f"_fused_{hook}")
            namespace["a" + hook] = getattr(_Fused, f"_fused_a{hook}")
    cls = type("FusedMiddleware", (_Fused,), namespace)
    schemas = [
        _Schema(member.state_schema, f"{name}.state.{index}")
        for index, member in enumerate(members)
    ]
    return [cls(members, name, hooked, runs, fold_after_model), *schemas]
