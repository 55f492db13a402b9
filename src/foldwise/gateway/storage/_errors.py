"""Errors raised by the gateway storage layer.

They extend the tree in `foldwise.errors`:

```
UsageError
└── InvalidIdError (also a ValueError)      an id failed validation; no SQL was run
    ├── InvalidThreadIdError
    └── InvalidRunIdError
FoldwiseRuntimeError
├── ThreadExistsError                       create_thread with an id that is taken
├── RunExistsError                          create_run with an id that is taken
└── StorageError
    └── GatewayStorageError                 the database failed (names operation + thread)
```

`foldwise.errors.ThreadNotFoundError` is raised where an operation needs an existing thread
(creating a run, appending to the transcript, adding a receipt, taking a lock).
"""

from __future__ import annotations

from foldwise.errors import FoldwiseRuntimeError, StorageError, UsageError

__all__ = [
    "GatewayStorageError",
    "InvalidIdError",
    "InvalidRunIdError",
    "InvalidThreadIdError",
    "RunExistsError",
    "ThreadExistsError",
]


class InvalidIdError(UsageError, ValueError):
    """An id is malformed; it was refused before any SQL ran.

    Attributes:
        value: The rejected value (as given).
    """

    label = "id"

    def __init__(self, value: object) -> None:
        self.value = value
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        super().__init__(
            f"invalid {self.label} {shown}: use a UUID or 1-128 characters from "
            "A-Z, a-z, 0-9, '_' and '-'"
        )


class InvalidThreadIdError(InvalidIdError):
    """A thread id is malformed; it was refused before any SQL ran."""

    label = "thread id"


class InvalidRunIdError(InvalidIdError):
    """A run id is malformed; it was refused before any SQL ran."""

    label = "run id"


class ThreadExistsError(FoldwiseRuntimeError):
    """A thread with this id already exists; pick another id or fetch the existing thread."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id!r} already exists")


class RunExistsError(FoldwiseRuntimeError):
    """A run with this id already exists."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id!r} already exists")


class GatewayStorageError(StorageError):
    """The gateway database failed; the message names the operation and the thread.

    Attributes:
        operation: The storage method that failed, e.g. ``append_transcript``.
        thread_id: The thread concerned, when there is one.
        retry_after: Seconds a client should wait before retrying (the 503's `Retry-After`):
            the usual causes (a write lock held past the busy timeout, a database restarting)
            pass.
    """

    retry_after = 1

    def __init__(self, message: str, *, operation: str, thread_id: str | None = None) -> None:
        self.operation = operation
        self.thread_id = thread_id
        where = f"{operation}" + (f" (thread {thread_id!r})" if thread_id else "")
        super().__init__(f"{where}: {message}")
