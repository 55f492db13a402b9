"""The sync/async pattern: one step generator, two drivers, identical behaviour."""

from __future__ import annotations

import asyncio
import threading

import pytest

from foldwise._steps import (
    Io,
    Steps,
    async_function,
    async_method,
    blocking,
    given_async,
    given_sync,
    perform,
    run_async,
    run_sync,
    sync_function,
    sync_method,
)


class _Failing(Exception):
    pass


class _Store:
    """A double whose sync and async forms record which one ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def put(self, key: str, *, value: int) -> int:
        self.calls.append(f"sync {key}")
        if key == "bad":
            raise _Failing(key)
        return value * 2

    async def aput(self, key: str, *, value: int) -> int:
        self.calls.append(f"async {key}")
        if key == "bad":
            raise _Failing(key)
        return value * 2


def _steps(store: _Store) -> Steps[list[object]]:
    out: list[object] = []
    out.append((yield Io.of(store.put, store.aput, "a", value=1)))
    try:
        yield Io.of(store.put, store.aput, "bad", value=2)
    except _Failing as exc:
        out.append(f"caught {exc}")
    out.append((yield Io.of(store.put, store.aput, "c", value=3)))
    return out


def test_both_drivers_run_the_same_logic_with_their_own_io() -> None:
    sync_store, async_store = _Store(), _Store()
    assert run_sync(_steps(sync_store)) == [2, "caught bad", 6]
    assert asyncio.run(run_async(_steps(async_store))) == [2, "caught bad", 6]
    assert sync_store.calls == ["sync a", "sync bad", "sync c"]
    assert async_store.calls == ["async a", "async bad", "async c"]


def test_an_unhandled_io_error_propagates_from_both_drivers() -> None:
    def steps(store: _Store) -> Steps[None]:
        yield Io.of(store.put, store.aput, "bad", value=0)

    with pytest.raises(_Failing):
        run_sync(steps(_Store()))
    with pytest.raises(_Failing):
        asyncio.run(run_async(steps(_Store())))


def test_blocking_calls_run_off_the_event_loop_thread() -> None:
    seen: list[bool] = []

    def where() -> bool:
        seen.append(threading.current_thread() is threading.main_thread())
        return True

    def steps() -> Steps[bool]:
        first = yield Io.call(where)
        second = yield Io.pure(where)
        return bool(first and second)

    assert asyncio.run(run_async(steps())) is True
    assert seen == [False, True]
    assert asyncio.run(blocking(lambda: 7)()) == 7


def test_a_generator_that_yields_nothing_returns_its_value() -> None:
    def steps() -> Steps[int]:
        return 5
        yield  # pragma: no cover - makes this a generator

    assert run_sync(steps()) == 5
    assert asyncio.run(run_async(steps())) == 5


class _Doubler:
    """A class that states each operation once, as a step method, and derives its twins."""

    def __init__(self, store: _Store) -> None:
        self.store = store

    def put_steps(self, key: str, *, value: int) -> Steps[int]:
        """Store twice `value` under `key`."""
        return (yield from perform(Io.of(self.store.put, self.store.aput, key, value=value)))

    put = sync_method(put_steps)
    aput = async_method(put_steps)


class _Tripler(_Doubler):
    def put_steps(self, key: str, *, value: int) -> Steps[int]:
        doubled = yield from super().put_steps(key, value=value)
        return doubled + value


def test_sync_and_async_methods_run_the_step_method_with_their_driver() -> None:
    store = _Store()
    doubler = _Doubler(store)
    assert doubler.put("a", value=2) == 4
    assert asyncio.run(doubler.aput("b", value=3)) == 6
    assert store.calls == ["sync a", "async b"]
    with pytest.raises(_Failing):
        doubler.put("bad", value=1)


def test_generated_methods_keep_the_docstring_and_take_their_own_names() -> None:
    assert _Doubler.put.__doc__ == _Doubler.aput.__doc__ == "Store twice `value` under `key`."
    assert (_Doubler.put.__name__, _Doubler.aput.__name__) == ("put", "aput")
    assert _Doubler.aput.__qualname__ == "_Doubler.aput"
    assert asyncio.iscoroutinefunction(_Doubler.aput)
    assert not asyncio.iscoroutinefunction(_Doubler.put)


def test_generated_methods_use_a_subclass_override_of_the_step_method() -> None:
    tripler = _Tripler(_Store())
    assert tripler.put("a", value=2) == 6
    assert asyncio.run(tripler.aput("b", value=2)) == 6


def test_a_given_callback_runs_only_under_its_own_driver() -> None:
    def steps(request: Io[int]) -> Steps[int]:
        return (yield from perform(request))

    async def acallback(x: int) -> int:
        return x + 1

    assert run_sync(steps(given_sync(lambda x: x + 1, 1))) == 2
    assert asyncio.run(run_async(steps(given_async(acallback, 1)))) == 2
    with pytest.raises(RuntimeError, match="other"):
        asyncio.run(run_async(steps(given_sync(lambda x: x + 1, 1))))
    with pytest.raises(RuntimeError, match="other"):
        run_sync(steps(given_async(acallback, 1)))


def test_sync_and_async_functions_run_a_step_function_under_their_own_names() -> None:
    def put_steps(store: _Store, key: str, *, value: int) -> Steps[int]:
        """Store twice `value`."""
        return (yield from perform(Io.of(store.put, store.aput, key, value=value)))

    put = sync_function(put_steps, "put")
    aput = async_function(put_steps, "aput")
    store = _Store()
    assert put(store, "a", value=1) == 2
    assert asyncio.run(aput(store, "b", value=2)) == 4
    assert store.calls == ["sync a", "async b"]
    assert (put.__name__, aput.__name__, aput.__doc__) == ("put", "aput", "Store twice `value`.")
