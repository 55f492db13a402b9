"""The sync/async pattern: one step generator, two drivers, identical behaviour."""

from __future__ import annotations

import asyncio
import threading

import pytest

from foldwise._steps import Io, Steps, blocking, run_async, run_sync


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
