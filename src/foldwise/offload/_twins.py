"""Sync and async methods made from one step-generator method, and framework-given callbacks.

`sync_method(put_steps)` and `async_method(put_steps)` are the one-line `run_sync` /
`run_async` wrappers of `foldwise._steps`, made once: they keep the step method's signature
(for mypy and for `inspect`) and its docstring, so a class states each signature once::

    class Store:
        def put_steps(self, key: str, *, value: int) -> Steps[int]: ...
        put = sync_method(put_steps)
        aput = async_method(put_steps)

`given_sync` / `given_async` turn a callback a framework hands in (LangChain passes a blocking
tool handler to `wrap_tool_call` and an awaitable one to `awrap_tool_call`) into an `Io`, so the
logic around it is written once too.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Concatenate, ParamSpec, TypeVar

from foldwise._steps import Io, Steps, run_async, run_sync

__all__ = ["async_method", "given_async", "given_sync", "perform", "sync_method"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
T = TypeVar("T")


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
