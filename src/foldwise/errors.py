"""The foldwise exception hierarchy.

Every error foldwise raises on purpose derives from `FoldwiseError`. Misuse errors say what the
caller got wrong (a config key, an argument, a message); runtime errors say what went wrong while
doing valid work. The gateway maps each class to one HTTP status in one place.

```
FoldwiseError
├── UsageError                      misuse: fix the call or the config
│   ├── ConfigError                 foldwise.yaml, env interpolation, validation (file + key)
│   ├── MessageFormatError          a malformed message (names its index and field)
│   ├── TraceFormatError            a replay trace line that cannot be read (names the line)
│   ├── ArtifactIdError             an offload id that foldwise did not generate
│   └── MemoryInputError            a bad namespace, fact text or memory argument (names it)
└── FoldwiseRuntimeError            valid request, failed execution
    ├── ModelConstructionError      a configured model could not be built (names the model)
    ├── ModelResponseError          the model's answer was unusable (cut off); nothing kept
    ├── SummaryGenerationError      every summarizer candidate failed; state untouched
    ├── CompactionDisabledError     summarization is disabled for this agent
    ├── ThreadNotFoundError         no such thread / checkpoint
    ├── ThreadBusyError             a run or compaction is already in flight on the thread
    ├── ArtifactNotFoundError       an offloaded artifact is missing or expired
    ├── StorageError                a storage backend failed
    ├── FactNotFoundError           no such memory fact in the namespace
    ├── RevisionConflictError       a memory write lost an optimistic-revision race (HTTP 409)
    └── ExtractionError             a memory extractor failed or answered malformed output
```
"""

from __future__ import annotations

__all__ = [
    "ArtifactIdError",
    "ArtifactNotFoundError",
    "CompactionDisabledError",
    "ConfigError",
    "ExtractionError",
    "FactNotFoundError",
    "FoldwiseError",
    "FoldwiseRuntimeError",
    "MemoryInputError",
    "MessageFormatError",
    "ModelConstructionError",
    "ModelResponseError",
    "RevisionConflictError",
    "StorageError",
    "SummaryGenerationError",
    "ThreadBusyError",
    "ThreadNotFoundError",
    "TraceFormatError",
    "UsageError",
]


class FoldwiseError(Exception):
    """Base class of every error foldwise raises on purpose."""


class UsageError(FoldwiseError):
    """The caller misused foldwise: a config value, an argument or an input is wrong."""


class ConfigError(UsageError):
    """A configuration file or value is invalid.

    The message names the file (when there is one) and the dotted key, for example
    ``foldwise.yaml: summarization.trigger[0].value: fraction must be in (0, 1]``.
    """

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None) -> None:
        self.path = path
        self.key = key
        prefix = ""
        if path:
            prefix += f"{path}: "
        if key:
            prefix += f"{key}: "
        super().__init__(prefix + message)


def _located(message: str, unit: str, number: int | None, field: str | None) -> str:
    """`message` prefixed with where it applies: `line 3, field 'role': ...` (known parts)."""
    where = [] if number is None else [f"{unit} {number}"]
    if field:
        where.append(f"field {field!r}")
    return f"{', '.join(where)}: {message}" if where else message


class MessageFormatError(UsageError):
    """A message is malformed (unknown role, tool message without a tool_call_id, ...).

    The message names the offending index and field; nothing is removed when it is raised.
    """

    def __init__(self, message: str, *, index: int | None = None, field: str | None = None) -> None:
        self.index = index
        self.field = field
        super().__init__(_located(message, "message", index, field))


class TraceFormatError(UsageError):
    """A replay trace cannot be read; the message names the line and field."""

    def __init__(self, message: str, *, line: int | None = None, field: str | None = None) -> None:
        self.line = line
        self.field = field
        super().__init__(_located(message, "line", line, field))


class ArtifactIdError(UsageError):
    """An artifact id is not one foldwise generated; no filesystem access was attempted."""


class MemoryInputError(UsageError):
    """A memory call got a bad namespace, fact text or argument; nothing was written.

    The message names the offending field (``namespace[1]``, ``text``, ``k``, ...).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class FoldwiseRuntimeError(FoldwiseError):
    """A valid request failed while being carried out."""


class ModelConstructionError(FoldwiseRuntimeError):
    """A configured chat model could not be constructed."""

    def __init__(self, model_name: str, reason: str) -> None:
        self.model_name = model_name
        super().__init__(f"model {model_name!r} could not be built: {reason}")


class ModelResponseError(FoldwiseRuntimeError):
    """The model's answer cannot be used (it was cut off mid-way); none of it was kept.

    Raised inside the model call, so the run fails before the answer reaches the state: a
    half-received answer never becomes a final message and a half-received tool call never runs.
    """


class SummaryGenerationError(FoldwiseRuntimeError):
    """Every summarizer candidate failed; the thread state was not changed.

    Attributes:
        attempts: One ``(model_name, error)`` pair per candidate tried.
    """

    def __init__(self, message: str, *, attempts: list[tuple[str, str]] | None = None) -> None:
        self.attempts = list(attempts or [])
        detail = "; ".join(f"{name}: {err}" for name, err in self.attempts)
        super().__init__(f"{message} ({detail})" if detail else message)


class CompactionDisabledError(FoldwiseRuntimeError):
    """Compaction is disabled (``summarization.enabled: false``) for this agent."""


class ThreadNotFoundError(FoldwiseRuntimeError):
    """The thread does not exist or has no checkpoint yet."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id!r} not found")


class ThreadBusyError(FoldwiseRuntimeError):
    """A run or compaction is already in flight on the thread; retry after it finishes."""

    def __init__(self, thread_id: str, what: str = "a run") -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id!r} has {what} in flight; retry after it finishes")


class ArtifactNotFoundError(FoldwiseRuntimeError):
    """An offloaded artifact is missing (deleted, expired or never written)."""


class StorageError(FoldwiseRuntimeError):
    """A storage backend failed."""


class FactNotFoundError(FoldwiseRuntimeError):
    """No fact with this id in the namespace (another namespace's facts are never found)."""

    def __init__(self, fact_id: str) -> None:
        self.fact_id = fact_id
        super().__init__(f"memory fact {fact_id!r} not found")


class RevisionConflictError(FoldwiseRuntimeError):
    """A memory write named a revision that is no longer current; nothing was written."""

    def __init__(self, fact_id: str, *, expected: int, actual: int) -> None:
        self.fact_id = fact_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"memory fact {fact_id!r} is at revision {actual}, not {expected}; "
            "read it again and retry"
        )


class ExtractionError(FoldwiseRuntimeError):
    """A memory extractor failed (timeout, model error, malformed answer); nothing was applied."""
