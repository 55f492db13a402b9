"""One implementation for sync and async callers: step generators and their two drivers.

foldwise's sync/async pattern (docs/architecture.md). Logic that needs I/O (a summarizer call,
a store write, a model handler) is written once, as a generator that *yields* `Io` requests
and receives their results; it never performs the I/O itself. Two drivers run it:
`run_sync` performs each request with its blocking form, `run_async` awaits its async form.
An exception raised by the I/O is thrown back into the generator at the `yield`, so the logic
handles failures in one place too::

    def _archive_steps(store, thread_id, text) -> Steps[ArtifactRef | None]:
        try:
            ref = yield Io.of(store.put, store.aput, thread_id, text, source="archive")
        except StorageError:
            return None
        return ref

    def archive(...):  return run_sync(_archive_steps(...))
    async def aarchive(...):  return await run_async(_archive_steps(...))

The generator is the single source of truth; the twins are one line each and cannot drift.
On a class, `sync_method` / `async_method` make those two lines once, keeping the step
method's signature (for mypy and `inspect`) and docstring::

    class Store:
        def put_steps(self, key: str, *, value: int) -> Steps[int]: ...
        put = sync_method(put_steps)
        aput = async_method(put_steps)

`given_sync` / `given_async` turn a callback a framework hands in (LangChain passes a blocking
tool handler to `wrap_tool_call` and an awaitable one to `awrap_tool_call`) into an `Io`, so the
logic around it is written once too; `perform` yields one request with its result's type.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

__all__ = [
    "Io",
    "Steps",
    "async_function",
    "async_method",
    "blocking",
    "blocking_method",
    "given_async",
    "given_sync",
    "inline_method",
    "perform",
    "run_async",
    "run_sync",
    "sync_function",
    "sync_method",
]

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")
P = ParamSpec("P")

Steps = Generator["Io[Any]", Any, R]
"""A step generator: yields `Io` requests, is sent their results, returns `R`."""


@dataclass(frozen=True, slots=True)
class Io(Generic[T]):
    """One I/O operation in its two forms, with the arguments both take."""

    sync: Callable[..., T]
    async_: Callable[..., Awaitable[T]]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        sync: Callable[P, T],
        async_: Callable[P, Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Io[T]:
        """The request to call `sync(*args, **kwargs)` or await `async_(*args, **kwargs)`."""
        return cls(sync, async_, args, dict(kwargs))

    @classmethod
    def call(cls, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Io[T]:
        """A request whose async form runs the blocking `fn` in a worker thread."""
        return cls(fn, blocking(fn), args, dict(kwargs))

    @classmethod
    def handler(cls, fn: Callable[..., Any], /, *args: Any) -> Io[Any]:
        """A framework continuation: sync in a sync run, a coroutine function in an async run.

        LangChain hands `wrap_model_call` a sync handler and `awrap_model_call` an async one;
        each driver only ever uses its own form, so the same callable fills both.
        """
        return cls(fn, fn, args, {})

    @classmethod
    def pure(cls, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Io[T]:
        """A request that is cheap CPU work: both drivers call `fn` inline."""
        return cls(fn, _inline(fn), args, dict(kwargs))


def blocking(fn: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    """The async form of a blocking callable: it runs in a worker thread, off the loop."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    return run


def _method_twin(
    method: Callable[Concatenate[S, P], R], runner: Callable[..., Awaitable[R]]
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    @functools.wraps(method)
    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await runner(method, self, *args, **kwargs)

    run.__name__ = run.__qualname__ = "a" + method.__name__
    return run


def blocking_method(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """`blocking` for a method: the ``a``-twin runs it in a worker thread, off the loop."""
    return _method_twin(method, asyncio.to_thread)


async def _call_inline(fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
    return fn(*args, **kwargs)


def inline_method(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The ``a``-twin of a method that performs no I/O (in-memory state): called inline."""
    return _method_twin(method, _call_inline)


def _inline(fn: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return fn(*args, **kwargs)

    return run


class _Driver(Generic[R]):
    """Advances a step generator: sends results, throws errors, keeps the return value."""

    def __init__(self, steps: Steps[R]) -> None:
        self.steps = steps
        self.result: Any = None
        self.error: Exception | None = None
        self.value: Any = None

    def next(self) -> Io[Any] | None:
        """The next request, or None once the generator returned (its value is `value`)."""
        try:
            if self.error is None:
                request = self.steps.send(self.result)
            else:
                request = self.steps.throw(self.error)
        except StopIteration as stop:
            self.value = stop.value
            return None
        self.result, self.error = None, None
        return request


def run_sync(steps: Steps[R]) -> R:
    """Drive `steps` to completion, performing each request with its blocking form."""
    driver = _Driver(steps)
    while (request := driver.next()) is not None:
        try:
            driver.result = request.sync(*request.args, **request.kwargs)
        except Exception as exc:
            driver.error = exc
    return driver.value  # type: ignore[no-any-return]


async def run_async(steps: Steps[R]) -> R:
    """Drive `steps` to completion, awaiting each request's async form."""
    driver = _Driver(steps)
    while (request := driver.next()) is not None:
        try:
            driver.result = await request.async_(*request.args, **request.kwargs)
        except Exception as exc:
            driver.error = exc
    return driver.value  # type: ignore[no-any-return]


def _named(run: Callable[..., Any], steps: Callable[..., Any], prefix: str) -> None:
    """Name `run` after `steps` without the `_steps` suffix (`put_steps` -> `put` / `aput`)."""
    name = prefix + steps.__name__.removesuffix("_steps")
    owner, dot, _ = steps.__qualname__.rpartition(".")
    run.__name__, run.__qualname__ = name, f"{owner}{dot}{name}"


def sync_method(steps: Callable[Concatenate[S, P], Steps[R]]) -> Callable[Concatenate[S, P], R]:
    """The blocking method that runs `steps` (looked up on the instance, so overrides count)."""
    name = steps.__name__

    @functools.wraps(steps)
    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        method: Callable[P, Steps[R]] = getattr(self, name)
        return run_sync(method(*args, **kwargs))

    _named(run, steps, "")
    return run


def async_method(
    steps: Callable[Concatenate[S, P], Steps[R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The coroutine method that runs `steps` with the async driver."""
    name = steps.__name__

    @functools.wraps(steps)
    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        method: Callable[P, Steps[R]] = getattr(self, name)
        return await run_async(method(*args, **kwargs))

    _named(run, steps, "a")
    return run


def sync_function(steps: Callable[P, Steps[R]], name: str) -> Callable[P, R]:
    """The blocking function `name` that runs the step-generator function `steps`."""

    @functools.wraps(steps)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return run_sync(steps(*args, **kwargs))

    run.__name__ = run.__qualname__ = name
    return run


def async_function(steps: Callable[P, Steps[R]], name: str) -> Callable[P, Coroutine[Any, Any, R]]:
    """The coroutine function `name` that runs `steps` with the async driver."""

    @functools.wraps(steps)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return await run_async(steps(*args, **kwargs))

    run.__name__ = run.__qualname__ = name
    return run


def perform(request: Io[T]) -> Generator[Io[T], T, T]:
    """Yield one request and return its result with its type (for use with `yield from`)."""
    return (yield request)


def _wrong_driver(*_args: object, **_kwargs: object) -> Any:
    raise RuntimeError("a callback given for one driver was run by the other")


async def _awrong_driver(*_args: object, **_kwargs: object) -> Any:
    _wrong_driver()


def given_sync(callback: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Io[T]:
    """The request to call a blocking callback the framework gave (only `run_sync` may run it)."""
    return Io(callback, _awrong_driver, args, dict(kwargs))


def given_async(callback: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> Io[T]:
    """The request to await a callback the framework gave (only `run_async` may run it)."""
    return Io(_wrong_driver, callback, args, dict(kwargs))
