"""OpenTelemetry spans and metrics, through the API only; a no-op when it is not installed.

foldwise never configures OpenTelemetry here: it asks the global tracer and meter providers
(`opentelemetry.trace.get_tracer`, `opentelemetry.metrics.get_meter`) for its instruments,
which stay no-ops until an application (or `foldwise serve`, see `docs/observability.md`)
installs an SDK. When `opentelemetry-api` is missing, every function here returns at once.

Attributes carry ids, counts, sizes and durations only: never user text, tool output or
summaries. Names follow the OpenTelemetry semantic conventions where they exist (`gen_ai.*`
for model calls and agent runs, `error.type`) and use the `foldwise.` prefix otherwise.

Call sites stay one line: `span(...)` is a context manager, `record_compaction` and
`record_offload` describe what a receipt or an artifact reference already says.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised in a subprocess (tests/test_telemetry_absent.py)
    AVAILABLE = False

if TYPE_CHECKING:
    from foldwise.compaction import CompactionReceipt
    from foldwise.offload import ArtifactRef

__all__ = [
    "AVAILABLE",
    "INSTRUMENTATION_NAME",
    "SECONDS_BUCKETS",
    "AttributeValue",
    "SpanLike",
    "add",
    "mark_error",
    "metrics_enabled",
    "observe_queue",
    "open_span",
    "record",
    "record_compaction",
    "record_offload",
    "span",
    "timed",
    "use_providers",
]

INSTRUMENTATION_NAME = "foldwise"
"""The instrumentation scope of every foldwise span and instrument."""

AttributeValue = str | bool | int | float | Sequence[str]
"""What an attribute may hold (ids, flags, counts, sizes; never user text)."""


class SpanLike(Protocol):
    """The part of an OpenTelemetry `Span` that call sites use (a no-op without the API)."""

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute."""

    def is_recording(self) -> bool:
        """Whether anything records this span (work only worth doing then)."""

    def end(self, end_time: int | None = None) -> None:
        """End the span (only for spans from `open_span`)."""


class _NoSpan:
    """The span handed out when OpenTelemetry is not installed."""

    def set_attribute(self, key: str, value: Any) -> None:
        """Ignore the attribute."""

    def is_recording(self) -> bool:
        """Never recording."""
        return False

    def end(self, end_time: int | None = None) -> None:
        """Nothing to end."""


_NO_SPAN = _NoSpan()


SECONDS_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
    1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
"""Bucket boundaries of every histogram (all in seconds): 1 ms to 82 s, the upper part being the
`gen_ai.client.operation.duration` advice. The SDK's default boundaries (0, 5, 10, 25, ...) are
meant for milliseconds and would put everything under 5 s into one bucket."""


@dataclass(frozen=True)
class _Metric:
    """How one instrument is made (created on first use, from the global meter)."""

    name: str
    kind: str
    unit: str
    description: str


_METRICS = {
    m.name: m
    for m in (
        _Metric("foldwise.compactions", "counter", "{compaction}", "Committed compactions."),
        _Metric(
            "foldwise.compaction.tokens_saved",
            "counter",
            "{token}",
            "Estimated request tokens freed by committed compactions (before minus after).",
        ),
        _Metric(
            "foldwise.compaction.duration", "histogram", "s", "Wall time of committed compactions."
        ),
        _Metric("foldwise.offload.bytes", "counter", "By", "UTF-8 bytes of offloaded texts."),
        _Metric("foldwise.run.duration", "histogram", "s", "Wall time of gateway runs."),
        _Metric(
            "foldwise.lease.wait",
            "histogram",
            "s",
            "Time to take (or be refused) a thread lease.",
        ),
        _Metric(
            "foldwise.queue.wait", "histogram", "s", "Time a queued run waited before it started."
        ),
        _Metric(
            "foldwise.busy_responses", "counter", "{response}", "409 answers: the thread was busy."
        ),
    )
}

_instruments: dict[str, Any] = {}
_tracer: Any = None
_meter: Any = None


def use_providers(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Take foldwise's tracer and meter from these providers instead of the global ones.

    For tests and for applications that keep their providers local; `None` goes back to the
    global provider. Instruments are made again from the new meter.
    """
    global _tracer, _meter
    if not AVAILABLE:
        return
    _tracer = tracer_provider.get_tracer(INSTRUMENTATION_NAME) if tracer_provider else None
    _meter = meter_provider.get_meter(INSTRUMENTATION_NAME) if meter_provider else None
    _instruments.clear()


def metrics_enabled() -> bool:
    """Whether a real meter provider is in place (a figure that costs a query is worth it)."""
    if not AVAILABLE:
        return False
    if _meter is not None and type(_meter).__name__ != "_ProxyMeter":
        return True
    provider = type(otel_metrics.get_meter_provider()).__name__
    return provider not in ("_ProxyMeterProvider", "NoOpMeterProvider")


def _get_tracer() -> Any:
    global _tracer
    if _tracer is None:
        # A proxy until an SDK provider is set; it then delegates to that provider.
        _tracer = otel_trace.get_tracer(INSTRUMENTATION_NAME)
    return _tracer


def _get_meter() -> Any:
    global _meter
    if _meter is None:
        _meter = otel_metrics.get_meter(INSTRUMENTATION_NAME)
    return _meter


def _instrument(name: str) -> Any:
    found = _instruments.get(name)
    if found is not None:
        return found
    spec = _METRICS[name]
    meter = _get_meter()
    if spec.kind == "counter":
        found = meter.create_counter(spec.name, unit=spec.unit, description=spec.description)
    else:
        found = meter.create_histogram(
            spec.name,
            unit=spec.unit,
            description=spec.description,
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
    _instruments[name] = found
    return found


def add(name: str, amount: float, attributes: Mapping[str, AttributeValue] | None = None) -> None:
    """Add `amount` to the counter `name` (one of the instruments listed in the docs)."""
    if AVAILABLE and amount:
        _instrument(name).add(amount, attributes=attributes)


def record(name: str, value: float, attributes: Mapping[str, AttributeValue] | None = None) -> None:
    """Record `value` in the histogram `name`."""
    if AVAILABLE:
        _instrument(name).record(value, attributes=attributes)


def _clean(attributes: Mapping[str, AttributeValue | None] | None) -> dict[str, AttributeValue]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}


def open_span(name: str, attributes: Mapping[str, AttributeValue | None] | None = None) -> SpanLike:
    """Start a span that the caller ends (`.end()`), for starts and ends in two callbacks.

    Its parent is the span current now; it does not become current itself.
    """
    if not AVAILABLE:
        return _NO_SPAN
    started: SpanLike = _get_tracer().start_span(name, attributes=_clean(attributes))
    return started


@contextlib.contextmanager
def span(
    name: str,
    attributes: Mapping[str, AttributeValue | None] | None = None,
    *,
    current: bool = False,
    start_time: int | None = None,
    end_time: int | None = None,
) -> Iterator[SpanLike]:
    """A span around the block; an exception marks it failed (`error.type`) and propagates.

    Args:
        name: The span name.
        attributes: Initial attributes (`None` values are left out).
        current: Make it the current span, so spans started inside are its children. Leave it
            off inside step generators (their code runs between the driver's awaits).
        start_time: Start in nanoseconds since the epoch (default: now).
        end_time: End in nanoseconds since the epoch (default: when the block exits).
    """
    if not AVAILABLE:
        yield _NO_SPAN
        return
    created = _get_tracer().start_span(name, attributes=_clean(attributes), start_time=start_time)
    try:
        if current:
            # The status is set below, without the message (it may quote input).
            quiet = {"record_exception": False, "set_status_on_exception": False}
            with otel_trace.use_span(created, **quiet):
                yield created
        else:
            yield created
    except Exception as error:
        mark_error(created, error)
        raise
    finally:
        created.end(end_time=end_time)


def mark_error(target: SpanLike, error: BaseException | str) -> None:
    """Mark `target` failed: `error.type` and an ERROR status (the message is not recorded)."""
    if not AVAILABLE or not target.is_recording():
        return
    kind = error if isinstance(error, str) else type(error).__qualname__
    target.set_attribute("error.type", kind)
    target.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR))  # type: ignore[attr-defined]


@contextlib.contextmanager
def timed(
    name: str, attributes: Mapping[str, AttributeValue] | None = None
) -> Iterator[dict[str, AttributeValue]]:
    """Record the block's wall time in the histogram `name` (seconds).

    Yields the attributes to record with, which the block may complete; an exception adds
    `error.type`.
    """
    values = dict(attributes or {})
    started = time.perf_counter()
    try:
        yield values
    except BaseException as error:
        values["error.type"] = type(error).__qualname__
        raise
    finally:
        record(name, time.perf_counter() - started, values)


def _nanos(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def record_compaction(receipt: CompactionReceipt) -> None:
    """A `foldwise.compaction` span and the compaction metrics, from a committed receipt.

    The span covers the compaction's own wall time (`duration_ms`, ending when the receipt
    was made); `precomputed` is read with a default of `False` (receipts of summaries made
    ahead of time carry it).
    """
    if not AVAILABLE:
        return
    precomputed = bool(getattr(receipt, "precomputed", False))
    labels: dict[str, AttributeValue] = {
        "foldwise.compaction.trigger": receipt.trigger,
        "foldwise.compaction.manual": receipt.manual,
        "foldwise.compaction.precomputed": precomputed,
    }
    saved = max(0, receipt.tokens_before - receipt.tokens_after)
    add("foldwise.compactions", 1, labels)
    add("foldwise.compaction.tokens_saved", saved, labels)
    record("foldwise.compaction.duration", receipt.duration_ms / 1000, labels)
    end = _nanos(receipt.created_at)
    attributes: dict[str, AttributeValue | None] = {
        **labels,
        "foldwise.compaction.id": receipt.id,
        "foldwise.compaction.reason": receipt.reason,
        "foldwise.compaction.tokens_before": receipt.tokens_before,
        "foldwise.compaction.tokens_after": receipt.tokens_after,
        "foldwise.compaction.tokens_saved": saved,
        "foldwise.compaction.messages_removed": receipt.messages_removed,
        "foldwise.compaction.messages_preserved": receipt.messages_preserved,
        "foldwise.compaction.messages_rescued": receipt.messages_rescued,
        "foldwise.compaction.summary_chars": receipt.summary_chars,
        "foldwise.compaction.summarizer_model": receipt.model_used,
        "foldwise.compaction.attempts": len(receipt.attempts),
        "foldwise.compaction.duration_ms": round(receipt.duration_ms, 3),
        "foldwise.compaction.archive_id": receipt.archive_id,
        "foldwise.thread.id": receipt.thread_id,
        "foldwise.run.id": receipt.run_id,
    }
    start = end - int(receipt.duration_ms * 1_000_000)
    with span("foldwise.compaction", attributes, start_time=start, end_time=end):
        pass


def record_offload(ref: ArtifactRef, *, new: bool, started: float) -> None:
    """A `foldwise.offload` span and the offloaded-bytes counter, from a stored artifact.

    Args:
        ref: The stored artifact's reference.
        new: The text was written (`False`: the thread already held the same text).
        started: `time.perf_counter()` when the store began.
    """
    if not AVAILABLE:
        return
    add("foldwise.offload.bytes", ref.size_bytes, {"foldwise.offload.kind": ref.kind})
    end = time.time_ns()
    attributes: dict[str, AttributeValue | None] = {
        "foldwise.offload.kind": ref.kind,
        "foldwise.offload.bytes": ref.size_bytes,
        "foldwise.offload.tokens": ref.tokens,
        "foldwise.offload.artifact_id": ref.artifact_id,
        "foldwise.offload.new": new,
        "foldwise.thread.id": ref.thread_id,
    }
    start = end - int((time.perf_counter() - started) * 1_000_000_000)
    with span("foldwise.offload", attributes, start_time=start, end_time=end):
        pass


_queue_seen: dict[str, float] = {}


def observe_queue(depth: int, oldest: datetime | None) -> None:
    """Remember the run queue as the dispatcher last saw it (read by the queue gauges).

    Args:
        depth: Pending runs seen (the dispatcher reads one page, so this is capped by it).
        oldest: When the oldest of them was queued, or `None` when the queue was empty.
    """
    if not AVAILABLE:
        return
    _queue_seen["depth"] = depth
    _queue_seen["oldest"] = oldest.timestamp() if oldest is not None else 0.0
    if "gauges" not in _instruments:
        _instruments["gauges"] = _queue_gauges()


def _queue_gauges() -> tuple[Any, Any]:
    meter = _get_meter()

    def depth(_options: Any) -> list[Any]:
        return [otel_metrics.Observation(_queue_seen.get("depth", 0))]

    def age(_options: Any) -> list[Any]:
        oldest = _queue_seen.get("oldest", 0.0)
        return [otel_metrics.Observation(max(0.0, time.time() - oldest) if oldest else 0.0)]

    callbacks: tuple[Callable[[Any], list[Any]], ...] = (depth, age)
    return (
        meter.create_observable_gauge(
            "foldwise.queue.depth",
            callbacks=[callbacks[0]],
            unit="{run}",
            description="Runs waiting in the queue at the dispatcher's last look.",
        ),
        meter.create_observable_gauge(
            "foldwise.queue.oldest_age",
            callbacks=[callbacks[1]],
            unit="s",
            description="Age of the oldest queued run at the dispatcher's last look.",
        ),
    )
