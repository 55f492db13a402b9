"""Storage of the gateway's own tables: threads, runs, transcript, receipts, thread leases.

One contract (`GatewayStorage`, which is the one SQL implementation `SqlGatewayStorage`) with
a dialect per database (`SqliteGatewayStorage`, `PostgresGatewayStorage`), one shared test
suite.
`open_storage(url)` picks the backend from `storage.url`. Thread state itself lives in
LangGraph's checkpointer, not here. See `docs/storage.md` for the schema, migrations,
multi-worker deployment and lease semantics.

Example:
    ```python
    async with open_storage("sqlite:///.foldwise/foldwise.db") as storage:
        await storage.create_thread("t-1", {"user": "ada"})
        if await storage.acquire_thread_lock("t-1", holder=run_id, kind="run", ttl_seconds=30):
            ...
    ```
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from foldwise.gateway.storage import _errors, _records
from foldwise.gateway.storage._errors import *  # noqa: F403 - the names in `_errors.__all__`
from foldwise.gateway.storage._factory import open_storage
from foldwise.gateway.storage._ids import validate_run_id, validate_thread_id
from foldwise.gateway.storage._migrations import MIGRATIONS, Migration
from foldwise.gateway.storage._records import *  # noqa: F403 - the names in `_records.__all__`
from foldwise.gateway.storage._sql import GatewayStorage, SqlGatewayStorage
from foldwise.gateway.storage._sqlite import SqliteGatewayStorage

if TYPE_CHECKING:
    from foldwise.gateway.storage._postgres import PostgresGatewayStorage

__all__ = [
    "MIGRATIONS",
    "GatewayStorage",
    "Migration",
    "PostgresGatewayStorage",
    "SqlGatewayStorage",
    "SqliteGatewayStorage",
    "open_storage",
    "validate_run_id",
    "validate_thread_id",
]
__all__ += _errors.__all__  # the error classes
__all__ += _records.__all__  # the value objects


def __getattr__(name: str) -> Any:
    # psycopg is an optional extra: import the Postgres backend only when it is asked for.
    if name == "PostgresGatewayStorage":
        from foldwise.gateway.storage._postgres import PostgresGatewayStorage

        return PostgresGatewayStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
