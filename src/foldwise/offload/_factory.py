"""Building a store from the configuration, and garbage collection for `foldwise offload gc`."""

from __future__ import annotations

from datetime import datetime, timedelta

from langgraph.store.base import BaseStore

from foldwise._steps import Io, Steps, perform, run_async, run_sync
from foldwise.config import FoldwiseConfig, OffloadConfig
from foldwise.offload._filesystem import FilesystemArtifactStore
from foldwise.offload._langgraph_store import StoreArtifactStore
from foldwise.offload._models import GcReport
from foldwise.offload._store import ArtifactStore

__all__ = ["acollect_garbage", "artifact_store_from_config", "collect_garbage"]


def _offload(config: FoldwiseConfig | OffloadConfig) -> OffloadConfig:
    return config.offload if isinstance(config, FoldwiseConfig) else config


def artifact_store_from_config(
    config: FoldwiseConfig | OffloadConfig, *, store: BaseStore | None = None
) -> ArtifactStore:
    """The artifact store the configuration describes.

    Args:
        config: The whole configuration or its `offload` block.
        store: A LangGraph store to keep artifacts in (shared by every worker); when omitted,
            the filesystem under `offload.root`.

    Returns:
        A `StoreArtifactStore` or a `FilesystemArtifactStore`, with the per-thread quota set.
    """
    offload = _offload(config)
    if store is not None:
        return StoreArtifactStore(store, max_bytes_per_thread=offload.max_bytes_per_thread)
    return FilesystemArtifactStore(offload.root, max_bytes_per_thread=offload.max_bytes_per_thread)


def _limits(offload: OffloadConfig) -> tuple[timedelta | None, int]:
    age = timedelta(days=offload.max_age_days) if offload.max_age_days is not None else None
    return age, offload.max_bytes_per_thread


def _gc_steps(
    config: FoldwiseConfig | OffloadConfig, now: datetime | None, store: ArtifactStore | None
) -> Steps[GcReport]:
    offload = _offload(config)
    max_age, quota = _limits(offload)
    target = store if store is not None else artifact_store_from_config(offload)
    return (
        yield from perform(
            Io.of(target.gc, target.agc, now=now, max_age=max_age, max_bytes_per_thread=quota)
        )
    )


def collect_garbage(
    config: FoldwiseConfig | OffloadConfig,
    *,
    now: datetime | None = None,
    store: ArtifactStore | None = None,
) -> GcReport:
    """Apply `offload.max_age_days` and `offload.max_bytes_per_thread` to every thread.

    This is what `foldwise offload gc` runs. A missing filesystem root is not an error (nothing
    to collect) and is not created.

    Args:
        config: The whole configuration or its `offload` block.
        now: The current time (default: now, UTC).
        store: The store to collect (default: `artifact_store_from_config(config)`).

    Returns:
        What was removed; `report.offload_removals()` gives the entries that drop the removed
        artifacts from an `offloads` channel.
    """
    return run_sync(_gc_steps(config, now, store))


async def acollect_garbage(
    config: FoldwiseConfig | OffloadConfig,
    *,
    now: datetime | None = None,
    store: ArtifactStore | None = None,
) -> GcReport:
    """Async twin of `collect_garbage`."""
    return await run_async(_gc_steps(config, now, store))
