"""Doubles and fixtures for the memory write-queue tests: a clock, outboxes, failing extractors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from foldwise._steps import Io, Steps
from foldwise.errors import ExtractionError
from foldwise.memory import Candidate, Fact, MemoryOutbox, open_outbox
from foldwise.memory._rules import RulesExtractor
from tests.support.gateway import drop_schema, postgres_url

__all__ = [
    "KINDS",
    "AsyncOnlyOutbox",
    "Clock",
    "FailingExtractor",
    "GatedExtractor",
    "memory_url",
    "turn",
]

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "local"]


class Clock:
    """A controllable UTC clock."""

    def __init__(self) -> None:
        self.now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def memory_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """A memory URL of `kind` (a SQLite file, a fresh PostgreSQL schema, ``memory://``)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'db' / 'memory.db'}"
    elif kind == "postgres":
        url, dsn, schema = postgres_url()
        try:
            yield url
        finally:
            drop_schema(dsn, schema)
    else:
        yield "memory://"


def turn(n: int, text: str, *, answer: str | None = None) -> list[BaseMessage]:
    """A user message (id ``u{n}``) and, optionally, the final answer (``a{n}``)."""
    messages: list[BaseMessage] = [HumanMessage(content=text, id=f"u{n}")]
    if answer is not None:
        messages.append(AIMessage(content=answer, id=f"a{n}"))
    return messages


class FailingExtractor:
    """An extractor that always fails (for retries and dead letters)."""

    name = "failing"

    def __init__(self) -> None:
        self.calls = 0

    def extract_steps(
        self, messages: Sequence[BaseMessage], *, known: Sequence[Fact]
    ) -> Steps[list[Candidate]]:
        self.calls += 1
        raise ExtractionError(f"model answered garbage (call {self.calls})")
        yield  # pragma: no cover - makes this a generator


class GatedExtractor:
    """The rules extractor, but each call first waits for `gate` (a slow model)."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.rules = RulesExtractor()

    def _wait(self) -> None:
        self.entered.set()
        self.gate.wait(30)

    async def _await(self) -> None:
        self.entered.set()
        await asyncio.to_thread(self.gate.wait, 30)

    def extract_steps(
        self, messages: Sequence[BaseMessage], *, known: Sequence[Fact]
    ) -> Steps[list[Candidate]]:
        yield Io(self._wait, self._await)
        return (yield from self.rules.extract_steps(messages, known=known))


class AsyncOnlyOutbox:
    """Wraps an outbox: async methods delegate, any sync method call raises (and is recorded)."""

    def __init__(self, inner: MemoryOutbox) -> None:
        self.inner = inner
        self.sync_calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name.startswith("a"):
            return target

        def refuse(*_args: object, **_kwargs: object) -> Any:
            self.sync_calls.append(name)
            raise AssertionError(f"sync outbox call {name} on the event loop path")

        return refuse


def outbox_for(url: str, clock: Clock) -> MemoryOutbox:
    """An outbox over `url` with `clock`, set up."""
    outbox = open_outbox(url)
    outbox.clock = clock  # type: ignore[attr-defined]
    outbox.setup()
    return outbox
