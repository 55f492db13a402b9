"""`open_backend`: URLs to backends, and clear errors naming `memory.url`."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from foldwise.errors import ConfigError, StorageError
from foldwise.memory import MemoryBackend, SqlMemoryBackend, StoreMemoryBackend, open_backend
from foldwise.memory._sql_postgres import PostgresDialect
from foldwise.memory._sql_sqlite import SqliteDialect
from tests.memory.conftest import NS, fact


def test_sqlite_urls(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path}/a/b.db")
    assert isinstance(backend, SqlMemoryBackend) and isinstance(backend.dialect, SqliteDialect)
    assert backend.dialect.path == f"{tmp_path}/a/b.db"
    assert isinstance(backend, MemoryBackend)
    assert backend.capabilities.transactions and backend.capabilities.vector
    relative = open_backend("sqlite:///.foldwise/foldwise.db")
    assert isinstance(relative, SqlMemoryBackend)
    assert relative.dialect.path == ".foldwise/foldwise.db"  # type: ignore[attr-defined]


def test_postgres_urls() -> None:
    for url in ("postgresql://u@h/db?schema=mem", "postgres://u@h/db?schema=mem"):
        backend = open_backend(url)
        assert isinstance(backend, SqlMemoryBackend)
        assert isinstance(backend.dialect, PostgresDialect)
        assert backend.dialect.schema == "mem"
    default = open_backend("postgresql://u@h/db")
    assert default.dialect.schema == "foldwise"  # type: ignore[attr-defined]


def test_memory_url_and_a_given_store() -> None:
    memory = open_backend("memory://")
    assert isinstance(memory, StoreMemoryBackend) and isinstance(memory, MemoryBackend)
    store = InMemoryStore()
    backend = open_backend("sqlite:///ignored.db", store=store)
    assert isinstance(backend, StoreMemoryBackend) and backend.store is store
    assert not backend.capabilities.transactions


@pytest.mark.parametrize(
    "url",
    [
        "mysql://user:secret@host/db",
        "sqlite://relative.db",
        "sqlite:///",
        "no-scheme",
        "postgresql://user:secret@h/db?schema=bad-name",
        "",
    ],
)
def test_bad_urls_name_the_key_and_not_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as raised:
        open_backend(url)
    assert raised.value.key == "memory.url"
    assert str(raised.value).startswith("memory.url: ")
    assert "secret" not in str(raised.value)


def test_using_a_backend_before_setup_is_a_clear_error(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path}/m.db")
    with pytest.raises(StorageError, match="setup"):
        backend.get(NS, "x")
    backend.setup()
    backend.setup()  # idempotent
    backend.write(NS, new=[fact("I like tea", id="t")])
    backend.close()
    backend.close()
    reopened = open_backend(f"sqlite:///{tmp_path}/m.db")
    reopened.setup()  # migrations already applied: no error, data kept
    assert reopened.get(NS, "t") is not None
    reopened.close()
