"""The SQLite memory tables share the gateway's database file, with its connection and with
other processes writing at the same time."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from foldwise.gateway.storage import open_storage
from foldwise.memory import SqlMemoryBackend, open_backend
from tests.memory.conftest import NS, fact

_WRITER = """
import sys
from datetime import UTC, datetime
from foldwise.memory import Fact, open_backend
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
backend = open_backend(url)
backend.setup()
now = datetime.now(UTC)
ns = ("users", "alice", "agents", "agent")
for i in range(count):
    backend.write(ns, new=[Fact(id=f"{name}-{i}", namespace=ns, attribute="note",
        text=f"note {i} from {name} 北京", valid_from=now, recorded_at=now)])
    backend.search(ns, "北京")
backend.close()
"""


async def test_memory_and_gateway_tables_in_one_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / '.foldwise' / 'foldwise.db'}"
    gateway = open_storage(url)
    await gateway.setup()
    memory = open_backend(url)
    await memory.asetup()
    try:
        await gateway.create_thread("t1", metadata={"owner": "alice"})
        await memory.awrite(NS, new=[fact("我住在北京", id="f1")])
        await gateway.create_thread("t2", metadata={})
        assert await gateway.get_thread("t1") is not None
        assert [hit.fact.id for hit in await memory.asearch(NS, "北京")] == ["f1"]
        assert await gateway.schema_version() >= 1  # the gateway's ledger is its own
    finally:
        await memory.aclose()
        await gateway.aclose()
    reopened = open_storage(url)
    await reopened.setup()  # the memory tables do not disturb the gateway's migrations
    assert await reopened.get_thread("t2") is not None
    await reopened.aclose()


def test_several_processes_write_one_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, url, name, "30"], stderr=subprocess.PIPE)
        for name in ("p1", "p2")
    ]
    errors = [writer.communicate(timeout=120)[1].decode() for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], errors
    backend = open_backend(url)
    backend.setup()
    try:
        assert len(backend.list_facts(NS)) == 60
        assert len(backend.search(NS, "p2 北京", k=200)) == 60
        assert {hit.fact.id for hit in backend.search(NS, "p2", k=200)} == {
            f"p2-{i}" for i in range(30)
        }
    finally:
        backend.close()


async def test_async_twins_run_concurrently_off_the_loop(tmp_path: Path) -> None:
    asyncio.get_running_loop().set_debug(True)
    backend = open_backend(f"sqlite:///{tmp_path / 'm.db'}")
    assert isinstance(backend, SqlMemoryBackend)
    await backend.asetup()
    dialect = backend.dialect
    threads: list[int] = []
    for name in ("read", "write"):
        original = getattr(dialect, name)

        def recording(original: Any = original) -> Any:
            threads.append(threading.get_ident())
            return original()

        setattr(dialect, name, recording)
    try:
        await asyncio.gather(
            *(backend.awrite(NS, new=[fact(f"fact {i} 東京", id=f"f{i}")]) for i in range(20)),
            *(backend.asearch(NS, "東京") for _ in range(20)),
        )
        assert len(await backend.alist_facts(NS)) == 20
        assert await backend.aget(NS, "f3") is not None
        assert await backend.adelete(NS, "f3") is True
        assert await backend.asearch_vector(NS, [1.0]) == []
    finally:
        await backend.aclose()
    assert len(threads) == 20 + 20 + 4
    assert threading.get_ident() not in threads  # every database call ran off the loop
